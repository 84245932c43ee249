/** The bounds of a request envelope's fields: size limits an operator may tune, and fixed ones. */

/** Size limits an operator may tune (e.g. from config); the JSON Schema publishes the defaults. */
export interface ContractLimits {
  /** UTF-8 bytes of `request.body`. */
  maxBodyBytes: number;
  maxHeaderCount: number;
  /** Sum of the lengths of every header name and value. */
  maxHeadersBytes: number;
  /** UTF-8 bytes of `meta.proxyData` serialized as JSON. */
  maxProxyDataBytes: number;
  maxUriLength: number;
}

export const DEFAULT_CONTRACT_LIMITS: Readonly<ContractLimits> = Object.freeze({
  maxBodyBytes: 1024 * 1024,
  maxHeaderCount: 100,
  maxHeadersBytes: 64 * 1024,
  maxProxyDataBytes: 64 * 1024,
  maxUriLength: 8 * 1024,
});

/** requestId, partition, limiter and cache keys: bounded so Redis/Kafka keys stay small. */
export const MAX_ID_LENGTH = 256;
export const MAX_SIGNING_KEY_ID_LENGTH = 128;
export const MAX_LIMITER_RATES = 8;
/** `meta.concurrency`: its key's length, and the most calls in flight a key may allow. */
export const MAX_CONCURRENCY_KEY_LENGTH = 200;
export const MAX_CONCURRENCY_LIMIT = 10_000;
/**
 * `meta.debounce`: its key's length, and its longest `delay` and `maxWait`: a burst's tasks wait
 * in the queue (or the outbox) until it ends, so a burst is kept to a bounded time.
 */
export const MAX_DEBOUNCE_KEY_LENGTH = 200;
export const MAX_DEBOUNCE_WAIT = '1h';
export const MAX_RETRY_ATTEMPTS = 100;
/** `meta.priority`: lowest and highest (the fair queue's bounds, `@requester/queue`). */
export const MIN_PRIORITY = -10;
export const MAX_PRIORITY = 10;
/**
 * Bound of the service-set attempt counters (`tryCount`, `retryBase`): with a full retry budget on
 * top, a result's `tryCount` still fits an int32 in any consumer's language.
 */
export const MAX_TRY_COUNT = 2_147_483_647 - MAX_RETRY_ATTEMPTS;
export const MAX_METHOD_LENGTH = 32;
/** A credential's name (`meta.credentials`, `requester credentials create <name>`). */
export const CREDENTIAL_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** A destination's name (`meta.destination`, `requester destinations create <name>`). */
export const DESTINATION_NAME_PATTERN = CREDENTIAL_NAME_PATTERN;

/** Longest client name (an API key's name): it is a label of logs, metrics and results. */
export const MAX_CLIENT_LENGTH = 64;
