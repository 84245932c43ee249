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

/** Wraps anything thrown into a RequesterError, keeping the original as `cause`. */
export function asRequesterError(err: unknown): RequesterError {
  if (err instanceof RequesterError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new RequesterError('internal', message, { cause: err });
}
