export * from './router/backpressure.ts';
export * from './router/fence.ts';
export * from './router/index.ts';
export * from './router/samplers.ts';
