export * from './dead-letter.ts';
export * from './deadline.ts';
export {
  MAX_DURATION_TEXT_LENGTH,
  MAX_INSTANT,
  MAX_INSTANT_MS,
  MAX_JSON_DEPTH,
  MAX_TRACEPARENT_LENGTH,
  MIN_INSTANT,
  MIN_INSTANT_MS,
  nestsDeeperThan,
  TRACEPARENT_PATTERN,
  traceparentProblem,
} from './fields.ts';
export {
  CLIENT_MANAGED_HEADERS,
  HEADER_NAME_PATTERN,
  HEADER_VALUE_PATTERN,
  type HeaderLimits,
  MAX_HEADER_NAME_LENGTH,
} from './headers.ts';
export type { FieldIssue, SafeParse } from './issues.ts';
export * from './json-schema.ts';
export * from './namespace.ts';
export * from './quota.ts';
export * from './request.ts';
export * from './result.ts';
export { decodeUtf8 } from './utf8.ts';
