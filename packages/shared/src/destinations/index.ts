export * from './resolve.ts';
export * from './spec.ts';
export * from './store.ts';
