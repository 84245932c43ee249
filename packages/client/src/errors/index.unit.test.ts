import type { ErrorCode } from '@requester/shared/errors';
import { describe, expect, it } from 'vitest';
import {
  ERROR_CLASSES,
  type ProblemCode,
  problemError,
  RateLimitedError,
  RequesterApiError,
  RequestIdConflictError,
} from './index.ts';

// Every code Requester's HTTP API can answer has its class, and the client names no code Requester
// lacks: a code added to RequesterError's ErrorCode fails `tsc` here until the client has it.
// (`invalid_config` and `invalid_usage` are the process's and the CLI's, never an HTTP answer.)
type ServerCodes = Exclude<ErrorCode, 'invalid_config' | 'invalid_usage'>;
const everyServerCode: Record<ServerCodes, true> = Object.fromEntries(
  Object.keys(ERROR_CLASSES).map((code) => [code, true]),
) as Record<ProblemCode, true>;
const noExtraCode: Record<ProblemCode, true> = everyServerCode;

describe('errors', () => {
  it('have one class per code, named after it', () => {
    expect(Object.keys(noExtraCode).length).toBe(Object.keys(ERROR_CLASSES).length);
    for (const [code, Class] of Object.entries(ERROR_CLASSES)) {
      const camel = code.replace(/(^|_)([a-z])/g, (_m, _s, c: string) => c.toUpperCase());
      expect(Class.name).toBe(`${camel}Error`);
    }
  });

  it('carry the problem body’s fields and the headers’ facts', () => {
    const error = problemError(
      {
        type: 'about:blank',
        title: 'Too Many Requests',
        status: 429,
        code: 'rate_limited',
        detail: 'slow down',
      },
      { retryAfter: 3, httpRequestId: 'h-1', requestId: 'r-1' },
    );
    expect(error).toBeInstanceOf(RateLimitedError);
    expect(error).toBeInstanceOf(RequesterApiError);
    expect(error).toMatchObject({
      status: 429,
      code: 'rate_limited',
      retryAfter: 3,
      requestId: 'r-1',
      issues: [],
    });
    expect(error.name).toBe('RateLimitedError');
    const conflict = problemError({
      type: 'about:blank',
      title: '',
      status: 409,
      code: 'request_id_conflict',
      detail: '',
    });
    expect(conflict).toBeInstanceOf(RequestIdConflictError);
  });

  it('keep a code this version does not know as a plain RequesterApiError', () => {
    const error = problemError({ type: 'about:blank', title: '', status: 418, code: 'teapot', detail: 'no' });
    expect(error.constructor).toBe(RequesterApiError);
    expect(error.code).toBe('teapot');
  });
});
