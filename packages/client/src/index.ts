/**
 * `@requester/client`: Requester's HTTP API, typed from its contract. Kafka producers and readers
 * of `out` are in `@requester/client/kafka`; signature verification for targets in
 * `@requester/client/receivers`.
 */
export * from './builders/index.ts';
export type * from './contract/index.ts';
export * from './errors/index.ts';
export {
  type CallOptions,
  type EventsOptions,
  RequesterClient,
  type RequesterClientOptions,
  type ResultOptions,
  type RetryOptions,
} from './http/index.ts';
export { newRequestId, newTraceparent } from './ids.ts';
