export * from './errors/index.ts';
export * from './log/index.ts';
export * from './metrics/index.ts';
export * from './redis/index.ts';
