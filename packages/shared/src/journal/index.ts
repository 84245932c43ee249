export * from './event.ts';
export * from './reader.ts';
export * from './writer.ts';
