export * from './queue/admin.ts';
export * from './queue/index.ts';
export * from './queue-config.ts';
export * from './router/backpressure.ts';
export * from './router/index.ts';
export * from './router/samplers.ts';
