import { isKafkaClientError, isKafkaRecordRefusal } from '../kafka/kafkajs/errors.ts';

/**
 * The one error hierarchy of Requester. Every error a role raises on purpose is a
 * RequesterError with a stable machine `code` (it travels in `meta.error.code` on `out` and in
 * HTTP problem bodies) and a human message. Anything else reaching a boundary is a bug or a
 * dependency failure and is wrapped as `internal`.
 */
export type ErrorCode =
  | 'invalid_config'
  | 'invalid_request'
  | 'payload_too_large'
  | 'dependency_unavailable'
  | 'timeout'
  | 'transport_error'
  | 'record_expired'
  | 'target_refused'
  | 'not_found'
  // A request's target credential (meta.credentials): no live one of that name, revoked, or its
  // OAuth2 token endpoint failed (or the process has no master key to open it).
  | 'credential_unknown'
  | 'credential_revoked'
  | 'credential_unavailable'
  // The credential (meta.credentials, or a signing key) may not be sent to the request's origin:
  // only to those named when it was created (`requester credentials set-origins`).
  | 'credential_origin_refused'
  // The request was taken back (DELETE /requests/{id}, `requester cancel`): its one result.
  | 'cancelled'
  // The request's start-by deadline (meta.deadline) passed before an attempt could start: its one result.
  | 'expired'
  // A newer request of its debounce key (meta.debounce) replaced it before it ran: its one result.
  | 'debounced'
  // Refusals of the HTTP API (problem bodies).
  | 'unauthorized'
  | 'forbidden'
  | 'rate_limited'
  | 'unsupported_media_type'
  | 'request_id_conflict'
  | 'overloaded'
  // A command line the `requester` CLI cannot run (exit code 2).
  | 'invalid_usage'
  | 'internal';

export class RequesterError extends Error {
  readonly code: ErrorCode;
  /** Extra, non-secret facts for logs and error bodies (e.g. the offending field). */
  readonly details: Record<string, unknown> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options?: { cause?: unknown; details?: Record<string, unknown> },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RequesterError';
    this.code = code;
    this.details = options?.details;
  }

  toJSON(): { code: ErrorCode; message: string; details?: Record<string, unknown> } {
    return this.details
      ? { code: this.code, message: this.message, details: this.details }
      : { code: this.code, message: this.message };
  }
}

/** Invalid configuration: the message names the variable and what is wrong with it. */
export class ConfigError extends RequesterError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('invalid_config', message, details ? { details } : undefined);
    this.name = 'ConfigError';
  }
}

/** Input that does not satisfy the contract; `issues` name each offending field by path. */
export class ValidationError extends RequesterError {
  readonly issues: ReadonlyArray<{ path: string; message: string }>;

  constructor(issues: ReadonlyArray<{ path: string; message: string }>) {
    super('invalid_request', issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; '), {
      details: { issues },
    });
    this.name = 'ValidationError';
    this.issues = issues;
  }
}

/** A mistake in how the `requester` command was called: exit code 2, with a pointer to --help. */
export class UsageError extends RequesterError {
  constructor(message: string) {
    super('invalid_usage', message);
    this.name = 'UsageError';
  }
}

/** Wraps anything thrown into a RequesterError, keeping the original as `cause`. */
export function asRequesterError(err: unknown): RequesterError {
  if (err instanceof RequesterError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new RequesterError('internal', message, { cause: err });
}

/** PostgreSQL SQLSTATE classes that say the data was refused: 22 data exception, 23 integrity constraint. */
const PG_DATA_CLASSES = new Set(['22', '23']);
/**
 * Redis error replies that say the server is busy or failing over, not that the command was wrong
 * (MOVED and ASK: a cluster's slots moved, a failover among them, and the client did not follow).
 */
const REDIS_BUSY_REPLY =
  /^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|OOM|NOREPLICAS|MISCONF|MOVED|ASK)\b/;
/** Client-side signs of a connection that failed, dropped or timed out (Node, postgres.js, ioredis). */
const OUTAGE_MESSAGE =
  /connection is closed|command timed out|stream isn't writeable|connection (terminated|ended|closed|destroyed)|timed out|timeout|econnrefused|econnreset|too many cluster redirections/i;

/**
 * Whether `err` says a dependency (Kafka, Redis, PostgreSQL) is away or overloaded — an outage, to be
 * retried with the same data — rather than a refusal of the data itself, which fails again however
 * often it is retried (a poison record, to be answered and set aside). Consumers use it to keep the
 * two apart: an outage retries the batch without committing; anything else is confined to the record
 * that caused it. Judged on the whole `cause` chain:
 * - RequesterError: `dependency_unavailable` and `timeout` are outages; other codes refusals.
 * - PostgreSQL: SQLSTATE classes 22 and 23 refuse the data; every other server error (connection,
 *   shutdown, resources, serialization, read-only standby...) is an outage.
 * - Kafka (kafkajs): record refusals (too large, invalid) are refusals; every other kafkajs error is
 *   an outage (a broker away, a leader moving, an authorization or topic problem of the deployment).
 * - Redis: busy/loading/failover replies are outages; other error replies (a script refusing its
 *   arguments) refusals.
 * - System and client connection errors (ECONNREFUSED, "Connection is closed", timeouts) are outages.
 * Anything else — a TypeError, a RangeError from our own code on strange input — is a refusal: an
 * unexpected exception handling one record stays with that record.
 */
export function isOutage(err: unknown): boolean {
  const chain = causeChain(err);
  // kafkajs wraps the broker's refusal of a record in its own retry errors: the refusal decides.
  if (isKafkaRecordRefusal(err)) return false;
  for (const e of chain) {
    const verdict = outageVerdict(e);
    if (verdict !== undefined) return verdict;
  }
  return false;
}

function causeChain(err: unknown): ErrorLike[] {
  const chain: ErrorLike[] = [];
  for (let e = err; e instanceof Object && chain.length < 6; e = (e as { cause?: unknown }).cause)
    chain.push(e as ErrorLike);
  return chain;
}

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  severity?: unknown;
}

/** true: an outage; false: a refusal; undefined: this link of the chain does not tell (look at its cause). */
function outageVerdict(e: ErrorLike): boolean | undefined {
  const name = typeof e.name === 'string' ? e.name : '';
  const message = typeof e.message === 'string' ? e.message : '';
  if (e instanceof RequesterError) {
    if (e.code === 'dependency_unavailable' || e.code === 'timeout') return true;
    return e.code === 'internal' ? undefined : false;
  }
  if (isKafkaClientError(e)) return true;
  if (name === 'PostgresError' || (typeof e.severity === 'string' && typeof e.code === 'string')) {
    return !PG_DATA_CLASSES.has(String(e.code).slice(0, 2));
  }
  if (name === 'ReplyError') return REDIS_BUSY_REPLY.test(message);
  if (name === 'MaxRetriesPerRequestError' || name === 'ClusterAllFailedError') return true;
  if (typeof e.code === 'string' && /^(E[A-Z]+|CONNECT(ION)?_[A-Z_]+)$/.test(e.code)) return true;
  if (OUTAGE_MESSAGE.test(message)) return true;
  return undefined;
}
