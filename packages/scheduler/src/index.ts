export * from './queue/admin.ts';
export * from './queue/index.ts';
export * from './router/index.ts';
