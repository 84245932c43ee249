export * from './master.ts';
export * from './origins.ts';
export { decrypt as decryptWith, encrypt as encryptWith } from './seal.ts';
export * from './signing.ts';
export * from './spec.ts';
export * from './store.ts';
