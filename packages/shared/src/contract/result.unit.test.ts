import { describe, expect, it } from 'vitest';
import type { ErrorCode, ValidationError } from '../errors/index.ts';
import { parseRequestEnvelope, safeParseRequestEnvelope } from './request.ts';
import {
  buildResult,
  ERROR_STATUS,
  errorResult,
  invalidRequestResult,
  parseResultEnvelope,
  safeParseResultEnvelope,
  wakeUpResult,
} from './result.ts';
import { designRequestExample, designResultExample } from './testing/examples.ts';

function expectIssue(input: unknown, path: string, message: RegExp): void {
  const result = safeParseResultEnvelope(input);
  expect(result.ok).toBe(false);
  if (!result.ok)
    expect(result.error.issues).toContainEqual({ path, message: expect.stringMatching(message) });
}

describe('the docs/architecture.md §4 result example', () => {
  it('is valid', () => {
    expect(parseResultEnvelope(designResultExample())).toEqual(designResultExample());
  });
});

describe('parseResultEnvelope', () => {
  it('drops unknown fields instead of failing (readers must tolerate additions)', () => {
    const input = { ...designResultExample(), extra: 1 };
    expect(parseResultEnvelope(input)).toEqual(designResultExample());
  });

  it('accepts a result without requestId (invalid input that had none)', () => {
    const { requestId: _, ...meta } = designResultExample().meta;
    expect(parseResultEnvelope({ ...designResultExample(), meta }).meta.requestId).toBeUndefined();
  });

  it.each<[string, (r: ReturnType<typeof designResultExample>) => void, string, RegExp]>([
    ['status below 100', (r) => Object.assign(r.response, { status: 99 }), 'response.status', />= 100/],
    ['status above 599', (r) => Object.assign(r.response, { status: 600 }), 'response.status', /<= 599/],
    [
      'status as text',
      (r) => Object.assign(r.response, { status: '200' }),
      'response.status',
      /expected number/,
    ],
    ['body missing', (r) => Reflect.deleteProperty(r.response, 'body'), 'response.body', /^required$/],
    [
      'header value number',
      (r) => Object.assign(r.response, { headers: { a: 1 } }),
      'response.headers.a',
      /string/,
    ],
    ['negative time', (r) => Object.assign(r.meta, { time: -1 }), 'meta.time', />= 0/],
    ['fractional time', (r) => Object.assign(r.meta, { time: 1.5 }), 'meta.time', /integer/],
    ['time beyond 2^53', (r) => Object.assign(r.meta, { time: 2 ** 53 }), 'meta.time', /integer|<=/],
    [
      'waitTime as text',
      (r) => Object.assign(r.meta, { waitTime: '1s' }),
      'meta.waitTime',
      /expected number/,
    ],
    ['cached missing', (r) => Reflect.deleteProperty(r.meta, 'cached'), 'meta.cached', /^required$/],
    ['tryCount negative', (r) => Object.assign(r.meta, { tryCount: -1 }), 'meta.tryCount', />= 0/],
    [
      'error code upper-case',
      (r) => Object.assign(r.meta, { error: { code: 'BAD', message: 'x' } }),
      'meta.error.code',
      /./,
    ],
    [
      'error message missing',
      (r) => Object.assign(r.meta, { error: { code: 'internal' } }),
      'meta.error.message',
      /required/,
    ],
  ])('refuses %s', (_name, change, path, message) => {
    const input = designResultExample();
    change(input);
    expectIssue(input, path, message);
  });
});

describe('buildResult', () => {
  it('builds a valid envelope and leaves optional parts out', () => {
    const result = buildResult({ requestId: 'r1', status: 204, tryCount: 1, timeNs: 1234.6 });
    expect(result).toEqual({
      response: { status: 204, body: '', headers: {} },
      meta: { requestId: 'r1', tryCount: 1, time: 1235, cached: false, waitTime: 0 },
    });
    expect(parseResultEnvelope(result)).toEqual(result);
  });

  it('echoes proxyData, even null', () => {
    expect(
      buildResult({ requestId: 'r', status: 200, tryCount: 1, proxyData: null }).meta.proxyData,
    ).toBeNull();
  });

  it('clamps nanoseconds to the JSON-safe range and never goes negative', () => {
    const result = buildResult({ requestId: 'r', status: 200, tryCount: 1, timeNs: 1e20, waitTimeNs: -5 });
    expect(result.meta.time).toBe(Number.MAX_SAFE_INTEGER);
    expect(result.meta.waitTime).toBe(0);
    expect(safeParseResultEnvelope(result).ok).toBe(true);
  });
});

describe('errorResult', () => {
  it.each(Object.entries(ERROR_STATUS) as Array<[ErrorCode, number]>)('%s → status %i', (code, status) => {
    const result = errorResult('r1', code, 'what happened');
    expect(result.response.status).toBe(status);
    expect(result.meta.error).toEqual({ code, message: 'what happened' });
    expect(result.meta.tryCount).toBe(0);
    expect(parseResultEnvelope(result)).toEqual(result);
  });

  it('uses 400 for invalid_request and 5xx for internal or transport failures', () => {
    expect(errorResult(undefined, 'invalid_request', 'x').response.status).toBe(400);
    expect(errorResult('r', 'internal', 'x').response.status).toBeGreaterThanOrEqual(500);
    expect(errorResult('r', 'transport_error', 'x').response.status).toBeGreaterThanOrEqual(500);
  });

  it('takes a status override and the attempt facts', () => {
    const result = errorResult('r1', 'transport_error', 'ECONNRESET', {
      status: 503,
      tryCount: 5,
      timeNs: 10,
      waitTimeNs: 20,
      proxyData: { a: 1 },
    });
    expect(result).toEqual({
      response: { status: 503, body: '', headers: {} },
      meta: {
        requestId: 'r1',
        tryCount: 5,
        time: 10,
        cached: false,
        waitTime: 20,
        proxyData: { a: 1 },
        error: { code: 'transport_error', message: 'ECONNRESET' },
      },
    });
  });

  it('points at the `in` record an error is about', () => {
    const source = { topic: 'requester.in', partition: 3, offset: '9007199254740993' };
    const result = errorResult(undefined, 'invalid_request', 'invalid JSON', { source });
    expect(result.meta.error).toEqual({ code: 'invalid_request', message: 'invalid JSON', source });
    expect(parseResultEnvelope(result)).toEqual(result);
  });

  it('leaves requestId out when unknown', () => {
    expect('requestId' in errorResult(undefined, 'invalid_request', 'x').meta).toBe(false);
  });
});

describe('invalidRequestResult', () => {
  function failed(input: unknown): ValidationError {
    const parsed = safeParseRequestEnvelope(input);
    if (parsed.ok) throw new Error('expected the input to be invalid');
    return parsed.error;
  }

  it('keys by the requestId and echoes proxyData when those are readable', () => {
    const input = designRequestExample();
    input.meta.limiter.algorithm = 'gcra';
    const result = invalidRequestResult(input, failed(input));
    expect(result.response.status).toBe(400);
    expect(result.meta.requestId).toBe('ord-42-create');
    expect(result.meta.proxyData).toEqual({ service: 'billing', tenant: 't1' });
    expect(result.meta.error?.code).toBe('invalid_request');
    expect(result.meta.error?.issues).toEqual([
      { path: 'meta.limiter.algorithm', message: expect.any(String) },
    ]);
    expect(result.meta.error?.message).toContain('meta.limiter.algorithm');
    expect(parseResultEnvelope(result)).toEqual(result);
  });

  it('leaves out a requestId or proxyData that is itself invalid', () => {
    const input = { request: { uri: '' }, meta: { requestId: 'has space', proxyData: 'x'.repeat(70_000) } };
    const result = invalidRequestResult(input, failed(input));
    expect(result.meta.requestId).toBeUndefined();
    expect(result.meta.proxyData).toBeUndefined();
    expect(parseResultEnvelope(result)).toEqual(result);
  });

  it('copes with input that is not an object at all', () => {
    const result = invalidRequestResult('garbage', failed('garbage'));
    expect(result.meta.requestId).toBeUndefined();
    expect(result.meta.error?.issues).toEqual([
      { path: '', message: 'expected object, received string "garbage"' },
    ]);
  });
});

describe('wakeUpResult', () => {
  it('answers 200 with the request’s own body and headers', () => {
    const envelope = parseRequestEnvelope({
      request: { uri: '', body: 'wake', headers: { 'x-why': 'alarm' } },
      meta: { requestId: 'alarm-1', proxyData: { to: 'billing' } },
    });
    const result = wakeUpResult(envelope, { tryCount: 1, waitTimeNs: 5 });
    expect(result).toEqual({
      response: { status: 200, body: 'wake', headers: { 'x-why': 'alarm' } },
      meta: {
        requestId: 'alarm-1',
        tryCount: 1,
        time: 0,
        cached: false,
        waitTime: 5,
        proxyData: { to: 'billing' },
      },
    });
  });

  it('refuses a request that has a target', () => {
    expect(() => wakeUpResult(parseRequestEnvelope(designRequestExample()), { tryCount: 1 })).toThrow(
      /wake-up/,
    );
  });
});
