export * from './queue/admin.ts';
export * from './queue/index.ts';
