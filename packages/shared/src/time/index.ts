export * from './duration.ts';
export * from './rfc3339.ts';
