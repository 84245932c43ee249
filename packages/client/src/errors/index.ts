import type { FieldIssue } from '../contract/index.ts';

/**
 * Errors of the client. What the HTTP API refuses comes as an RFC 9457 problem body with a stable
 * `code`; each code has its class here (`RateLimitedError` for `rate_limited`, …), all of them
 * `RequesterApiError`s carrying the body's fields, so callers branch with `instanceof` or on `code`.
 */

/** The problem codes of the HTTP API, as Requester's `ErrorCode` names them. */
export type ProblemCode =
  | 'invalid_request'
  | 'payload_too_large'
  | 'dependency_unavailable'
  | 'timeout'
  | 'transport_error'
  | 'record_expired'
  | 'target_refused'
  | 'not_found'
  | 'credential_unknown'
  | 'credential_origin_refused'
  | 'credential_revoked'
  | 'credential_unavailable'
  | 'cancelled'
  | 'expired'
  | 'debounced'
  | 'unauthorized'
  | 'forbidden'
  | 'rate_limited'
  | 'unsupported_media_type'
  | 'request_id_conflict'
  | 'overloaded'
  | 'internal';

/** An RFC 9457 problem body as Requester writes it. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  /** Stable machine code: the class of the error. */
  code: string;
  /** Human explanation; not stable, do not parse. */
  detail: string;
  /** For `invalid_request` and `forbidden`: every offending field, by dotted path. */
  issues?: FieldIssue[];
}

/** What the client adds to a problem body: from the reply's headers, and the request concerned. */
export interface ApiErrorExtra {
  retryAfter?: number | undefined;
  httpRequestId?: string | undefined;
  requestId?: string | undefined;
}

/** Every error the client throws. */
export class RequesterClientError extends Error {
  override name = 'RequesterClientError';
}

/** A refusal of the HTTP API: its status, the problem body's fields, `Retry-After` when sent. */
export class RequesterApiError extends RequesterClientError {
  override name = 'RequesterApiError';
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  readonly type: string;
  readonly issues: FieldIssue[];
  /** Seconds to wait before trying again, from `Retry-After` (absent when not sent). */
  readonly retryAfter: number | undefined;
  /** `x-request-id` of the HTTP exchange (give it to the operator: log lines carry it). */
  readonly httpRequestId: string | undefined;
  /** The requestId of the request concerned, when the client knows it. */
  readonly requestId: string | undefined;

  constructor(
    problem: Problem,
    extra: {
      retryAfter?: number | undefined;
      httpRequestId?: string | undefined;
      requestId?: string | undefined;
    } = {},
  ) {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
    this.status = problem.status;
    this.code = problem.code;
    this.title = problem.title;
    this.detail = problem.detail;
    this.type = problem.type;
    this.issues = problem.issues ?? [];
    this.retryAfter = extra.retryAfter;
    this.httpRequestId = extra.httpRequestId;
    this.requestId = extra.requestId;
  }
}

/** `400`: the envelope breaks the contract (`issues` names each field), or a bad `wait` / `since` / id. */
export class InvalidRequestError extends RequesterApiError {
  override name = 'InvalidRequestError';
}
/** `413`: the body is above the gateway's MAX_BODY_BYTES. */
export class PayloadTooLargeError extends RequesterApiError {
  override name = 'PayloadTooLargeError';
}
/** `503` + Retry-After: Kafka, Redis or PostgreSQL did not answer; nothing was accepted (retried by the client). */
export class DependencyUnavailableError extends RequesterApiError {
  override name = 'DependencyUnavailableError';
}
/** `timeout`: the target did not answer in time (a result's `meta.error.code`). */
export class TimeoutError extends RequesterApiError {
  override name = 'TimeoutError';
}
/** `transport_error`: the connection to the target failed (a result's `meta.error.code`). */
export class TransportErrorError extends RequesterApiError {
  override name = 'TransportErrorError';
}
/** `record_expired`: the request's `in` record was gone when it ran (a result's `meta.error.code`). */
export class RecordExpiredError extends RequesterApiError {
  override name = 'RecordExpiredError';
}
/** `target_refused`: a private target the deployment does not allow (a result's `meta.error.code`). */
export class TargetRefusedError extends RequesterApiError {
  override name = 'TargetRefusedError';
}
/** `404`: no such request of this API key (cancel, events), or the route is not served here. */
export class NotFoundError extends RequesterApiError {
  override name = 'NotFoundError';
}
/** `400`: `meta.credentials` names no live credential. */
export class CredentialUnknownError extends RequesterApiError {
  override name = 'CredentialUnknownError';
}
/**
 * `403`: the credential (or store signing key) named is not bound to the request's origin, the
 * `Host` header names another host, or the credential has no origins yet.
 */
export class CredentialOriginRefusedError extends RequesterApiError {
  override name = 'CredentialOriginRefusedError';
}
/** `403`: the signing key or credential named was revoked. */
export class CredentialRevokedError extends RequesterApiError {
  override name = 'CredentialRevokedError';
}
/** `credential_unavailable`: the credential's token endpoint failed (a result's `meta.error.code`). */
export class CredentialUnavailableError extends RequesterApiError {
  override name = 'CredentialUnavailableError';
}
/** `cancelled`: the request was taken back (a result's `meta.error.code`, status 499). */
export class CancelledError extends RequesterApiError {
  override name = 'CancelledError';
}
/** `expired`: the request's start-by deadline passed before an attempt started (a result's `meta.error.code`, status 504). */
export class ExpiredError extends RequesterApiError {
  override name = 'ExpiredError';
}
/** `debounced`: a newer request of its debounce key replaced it, not executed (a result's `meta.error.code`, status 409; `meta.debounced.by` names it). */
export class DebouncedError extends RequesterApiError {
  override name = 'DebouncedError';
}
/** `401`: no valid API key. */
export class UnauthorizedError extends RequesterApiError {
  override name = 'UnauthorizedError';
}
/** `403`: outside the API key's scopes (hosts, sync, schedule, credentials); `issues` names each field. */
export class ForbiddenError extends RequesterApiError {
  override name = 'ForbiddenError';
}
/** `429` + Retry-After: above the key's rate or its share of the gateway (retried by the client). */
export class RateLimitedError extends RequesterApiError {
  override name = 'RateLimitedError';
}
/** `415`: the body was not sent as JSON (the client always sends JSON). */
export class UnsupportedMediaTypeError extends RequesterApiError {
  override name = 'UnsupportedMediaTypeError';
}
/** `409`: the requestId names a different request of this key within the dedup window. */
export class RequestIdConflictError extends RequesterApiError {
  override name = 'RequestIdConflictError';
}
/** `503` + Retry-After: the gateway holds as much as it may (retried by the client). */
export class OverloadedError extends RequesterApiError {
  override name = 'OverloadedError';
}
/** `500`: a bug of the gateway. */
export class InternalError extends RequesterApiError {
  override name = 'InternalError';
}

type ApiErrorClass = new (...args: ConstructorParameters<typeof RequesterApiError>) => RequesterApiError;

/** The class of each code (a Record over `ProblemCode`: a code without its class does not compile). */
export const ERROR_CLASSES: Readonly<Record<ProblemCode, ApiErrorClass>> = {
  invalid_request: InvalidRequestError,
  payload_too_large: PayloadTooLargeError,
  dependency_unavailable: DependencyUnavailableError,
  timeout: TimeoutError,
  transport_error: TransportErrorError,
  record_expired: RecordExpiredError,
  target_refused: TargetRefusedError,
  not_found: NotFoundError,
  credential_unknown: CredentialUnknownError,
  credential_origin_refused: CredentialOriginRefusedError,
  credential_revoked: CredentialRevokedError,
  credential_unavailable: CredentialUnavailableError,
  cancelled: CancelledError,
  expired: ExpiredError,
  debounced: DebouncedError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  rate_limited: RateLimitedError,
  unsupported_media_type: UnsupportedMediaTypeError,
  request_id_conflict: RequestIdConflictError,
  overloaded: OverloadedError,
  internal: InternalError,
};

/** The typed error of a problem body; a code this version does not know is a plain RequesterApiError. */
export function problemError(problem: Problem, extra?: ApiErrorExtra): RequesterApiError {
  const Class = Object.hasOwn(ERROR_CLASSES, problem.code)
    ? ERROR_CLASSES[problem.code as ProblemCode]
    : RequesterApiError;
  return new Class(problem, extra);
}

/**
 * `call()` ran out of time before the result came: the request goes on in Requester. Read its
 * result later with `result(requestId)` or on `out`.
 */
export class DeadlineExceededError extends RequesterClientError {
  override name = 'DeadlineExceededError';
  readonly requestId: string;

  constructor(requestId: string) {
    super(`no result for request ${JSON.stringify(requestId)} before the deadline; it goes on in Requester`);
    this.requestId = requestId;
  }
}

/** The gateway could not be reached (connection refused or reset) after every retry. */
export class ConnectionError extends RequesterClientError {
  override name = 'ConnectionError';
}

/** The gateway answered something that is not Requester's API (a proxy's page, a wrong URL). */
export class UnexpectedResponseError extends RequesterClientError {
  override name = 'UnexpectedResponseError';
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}
