export * from './duration.ts';
export * from './rfc3339.ts';
export * from './within.ts';
