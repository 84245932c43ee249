import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../errors/index.ts';
import {
  attemptsInBudget,
  createRequestContract,
  DEFAULT_CONTRACT_LIMITS,
  isOrderedPartition,
  isWakeUp,
  kafkaKeyFor,
  LIMITER_ALGORITHMS,
  parseRequestEnvelope,
  type RequestEnvelope,
  safeParseRequestEnvelope,
} from './request.ts';
import { designRequestExample } from './testing/examples.ts';

const REMOVE = Symbol('remove');
const { maxBodyBytes, maxHeaderCount, maxHeadersBytes, maxProxyDataBytes, maxUriLength } =
  DEFAULT_CONTRACT_LIMITS;

/** The docs/architecture.md §4 example with one dotted path set to `value` (or removed). */
function withField(path: string, value: unknown): unknown {
  const envelope: Record<string, unknown> = designRequestExample();
  const keys = path.split('.');
  let node = envelope;
  for (const key of keys.slice(0, -1)) {
    node[key] ??= {};
    node = node[key] as Record<string, unknown>;
  }
  const last = keys.at(-1) ?? '';
  if (value === REMOVE) delete node[last];
  else node[last] = value;
  return envelope;
}

/** `depth` arrays, each inside the previous one. */
function nested(depth: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

function cyclic(): unknown {
  const node: Record<string, unknown> = {};
  node.self = node;
  return node;
}

function expectIssue(input: unknown, path: string, message: RegExp): void {
  const result = safeParseRequestEnvelope(input);
  expect(result.ok).toBe(false);
  if (result.ok) return;
  expect(result.error.issues).toContainEqual({ path, message: expect.stringMatching(message) });
  // The one-line message (what logs and HTTP bodies show) names the field too.
  expect(result.error.message).toContain(path === '' ? result.error.issues[0]?.message : `${path}: `);
}

function expectValid(input: unknown): RequestEnvelope {
  const result = safeParseRequestEnvelope(input);
  if (!result.ok) throw new Error(`expected valid, got: ${result.error.message}`);
  return result.value;
}

const headerWith = (name: string, value: string) => ({ 'content-type': 'application/json', [name]: value });
const manyHeaders = (count: number) =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`x-h${i}`, 'v']));
const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const parentId = '00f067aa0ba902b7';

describe('the docs/architecture.md §4 example', () => {
  it('is valid and keeps every field', () => {
    expect(parseRequestEnvelope(designRequestExample())).toEqual(designRequestExample());
  });
});

describe('valid fields', () => {
  it.each<[string, unknown]>([
    ['request.uri', ''],
    ['request.uri', 'http://localhost:8080/x'],
    ['request.uri', 'https://api.example/a/b?c=d&e=%20#frag'],
    ['request.uri', 'HTTPS://API.EXAMPLE/'],
    ['request.uri', 'http://[::1]:9000/'],
    ['request.uri', `https://a.example/${'x'.repeat(maxUriLength - 20)}`],
    ['request.method', 'GET'],
    ['request.method', 'PATCH'],
    ['request.method', 'PURGE'],
    ['request.method', REMOVE],
    ['request.body', ''],
    ['request.body', REMOVE],
    ['request.body', 'x'.repeat(maxBodyBytes)],
    ['request.body', 'é'.repeat(maxBodyBytes / 2)],
    ['request.headers', {}],
    ['request.headers', REMOVE],
    ['request.headers', { Authorization: 'Bearer abc', 'X-Custom_Header.1': 'a\tb ü' }],
    ['request.headers', manyHeaders(maxHeaderCount)],
    ['request.headers', { host: 'override.example' }],
    ['meta.requestId', 'a'],
    ['meta.requestId', 'x'.repeat(256)],
    ['meta.requestId', '550e8400-e29b-41d4-a716-446655440000'],
    ['meta.requestId', 'tenant:1/order#42'],
    ['meta.traceparent', REMOVE],
    ['meta.traceparent', `01-${traceId}-${parentId}-00-future-field`],
    ['meta.partition', REMOVE],
    ['meta.partition', 'order-42'],
    ['meta.partition', '!o'],
    ['meta.sync', true],
    ['meta.priority', -10],
    ['meta.priority', 0],
    ['meta.priority', 10],
    ['meta.limiter.cost', 1],
    ['meta.limiter.cost', 10],
    ['meta.concurrency', { key: 'tenant-7', limit: 1 }],
    ['meta.timeout', '1ms'],
    ['meta.timeout', '2.5s'],
    ['meta.concurrency', { key: 'k'.repeat(200), limit: 10_000 }],
    ['meta.deadline', '30s'],
    ['meta.deadline', '2026-12-01T09:05:00+01:00'],
    ['meta.sync', REMOVE],
    ['meta.scheduled', '2026-12-01T11:00:00+02:00'],
    ['meta.scheduled', '2026-12-01T09:00:00.123456Z'],
    ['meta.scheduled', REMOVE],
    ['meta.scheduled', '1970-01-01T00:00:00Z'],
    ['meta.scheduled', '1970-01-01T01:00:00+01:00'],
    ['meta.scheduled', '9999-12-31T23:59:59.999Z'],
    ['meta.scheduled', '9999-12-31T23:59:59+00:00'],
    ['meta.proxyData', null],
    ['meta.proxyData', nested(64)],
    ['meta.proxyData', 'a string'],
    ['meta.proxyData', [1, { a: [true] }]],
    ['meta.proxyData', { max: 9007199254740991, min: -9007199254740991, ratio: 0.1, tiny: 5e-324 }],
    ['meta.proxyData', 'x'.repeat(maxProxyDataBytes - 2)],
    ['meta.limiter', REMOVE],
    ['meta.limiter.rates', [{ duration: '1.5h', value: 1 }]],
    ['meta.limiter.rates', [{ duration: '1ms', value: 1 }]],
    ['meta.limiter.rates', [{ duration: '1000us', value: 1 }]],
    ['meta.limiter.rates', [{ duration: '2562047h', value: 1 }]],
    ['meta.limiter.rates', Array.from({ length: 8 }, () => ({ duration: '1s', value: 1 }))],
    ['meta.retry', REMOVE],
    ['meta.retry', { max: 1 }],
    ['meta.retry.delay', '0'],
    ['meta.retry.delay', '0s'],
    ['meta.retry.delay', '30s'],
    ['meta.retry.multiplier', 1],
    ['meta.retry.jitter', 0],
    ['meta.retry.jitter', 1],
    ['meta.retry.max', 100],
    ['meta.cache', REMOVE],
    ['meta.cache.ttl', '2h45m'],
    ['meta.signing', { keyId: 'partner-a-2026' }],
    ['tryCount', 0],
    ['tryCount', 4],
    ['retryBase', 0],
    ['createdAt', '2026-11-30T06:00:00.000Z'],
  ])('%s = %j', (path, value) => {
    expectValid(withField(path, value));
  });

  it.each(LIMITER_ALGORITHMS)('limiter algorithm %s', (algorithm) => {
    expectValid(withField('meta.limiter.algorithm', algorithm));
  });

  it('defaults the method to GET', () => {
    expect(expectValid(withField('request.method', REMOVE)).request.method).toBe('GET');
  });

  it('fills the retry defaults it documents', () => {
    const { meta } = expectValid(withField('meta.retry', { max: 3 }));
    expect(meta.retry).toEqual({ max: 3, delay: '1s', maxDelay: '5m', multiplier: 2, jitter: 0.2 });
  });

  it('accepts a minimal wake-up (alarm clock)', () => {
    const envelope = expectValid({
      request: { uri: '' },
      meta: { requestId: 'alarm-1', scheduled: '2026-12-01T09:00:00Z', proxyData: { wake: 'billing' } },
    });
    expect(isWakeUp(envelope)).toBe(true);
  });
});

describe('invalid fields name their path', () => {
  it.each<[string, unknown, string, RegExp]>([
    // the envelope itself
    ['request', REMOVE, 'request', /^required$/],
    ['meta', REMOVE, 'meta', /^required$/],
    ['request', 'GET /', 'request', /expected object, received string/],
    ['meta', [], 'meta', /expected object, received an array/],
    [
      'extra',
      1,
      '',
      /unknown key "extra" \(allowed: request, meta, tryCount, createdAt, waitTime, retryBase, withinHorizon\)/,
    ],
    ['request.timeout', '5s', 'request', /unknown key "timeout" \(allowed: uri, method, body, headers\)/],
    ['meta.retries', 3, 'meta', /unknown key "retries"/],
    [
      'meta.limiter.burst',
      3,
      'meta.limiter',
      /unknown key "burst" \(allowed: key, algorithm, rates, cost, quota\)/,
    ],
    ['meta.limiter.rates.0.unit', 's', 'meta.limiter.rates.0', /unknown key "unit"/],
    ['meta.retry.backoff', 'exp', 'meta.retry', /unknown key "backoff"/],
    ['meta.cache.scope', 'x', 'meta.cache', /unknown key "scope"/],
    ['meta.signing', { keyId: 'k', secret: 's3cr3t' }, 'meta.signing', /unknown key "secret"/],
    // request.uri
    ['request.uri', REMOVE, 'request.uri', /^required$/],
    ['request.uri', 42, 'request.uri', /expected string, received 42/],
    ['request.uri', 'ftp://files.example/x', 'request.uri', /scheme "ftp" is not supported/],
    ['request.uri', 'file:///etc/passwd', 'request.uri', /scheme "file" is not supported/],
    ['request.uri', 'mailto:a@b.example', 'request.uri', /scheme "mailto"/],
    ['request.uri', 'api.partner.example/orders', 'request.uri', /absolute http\(s\) URL/],
    ['request.uri', '/orders', 'request.uri', /absolute http\(s\) URL/],
    ['request.uri', 'http://', 'request.uri', /absolute http\(s\) URL/],
    ['request.uri', 'http:/a.example/x', 'request.uri', /must start with http:\/\/ or https:\/\//],
    ['request.uri', 'https:\\\\a.example', 'request.uri', /must start with http:\/\/ or https:\/\//],
    ['request.uri', ' https://a.example/', 'request.uri', /whitespace/],
    ['request.uri', 'https://a.example/a b', 'request.uri', /whitespace/],
    [
      'request.uri',
      `https://a.example/${'x'.repeat(maxUriLength)}`,
      'request.uri',
      /at most 8192 characters/,
    ],
    // request.method
    ['request.method', 'get', 'request.method', /upper-case HTTP method/],
    ['request.method', '', 'request.method', /upper-case HTTP method/],
    ['request.method', 'GE T', 'request.method', /upper-case HTTP method/],
    ['request.method', 'CONNECT', 'request.method', /CONNECT is not supported/],
    ['request.method', 'TRACE', 'request.method', /TRACE is not supported/],
    ['request.method', 'X'.repeat(33), 'request.method', /at most 32 characters/],
    ['request.method', 1, 'request.method', /expected string, received 1/],
    // request.body
    ['request.body', { id: 42 }, 'request.body', /expected string, received an object/],
    ['request.body', 'x'.repeat(maxBodyBytes + 1), 'request.body', /larger than the limit of 1048576 bytes/],
    [
      'request.body',
      'é'.repeat(maxBodyBytes / 2 + 1),
      'request.body',
      /1048578 bytes \(UTF-8\), over the limit/,
    ],
    // request.headers
    ['request.headers', ['content-type: a'], 'request.headers', /expected record, received an array/],
    ['request.headers', 'content-type: a', 'request.headers', /expected record, received string/],
    ['request.headers', { 'x-n': 1 }, 'request.headers.x-n', /expected string, received 1/],
    ['request.headers', headerWith('bad name', 'v'), 'request.headers.bad name', /must be an HTTP token/],
    ['request.headers', headerWith('x-ä', 'v'), 'request.headers.x-ä', /must be an HTTP token/],
    ['request.headers', headerWith('', 'v'), 'request.headers.', /must be an HTTP token/],
    ['request.headers', headerWith('x-a', 'a\r\nInjected: 1'), 'request.headers.x-a', /control characters/],
    ['request.headers', headerWith('x-a', 'a\u0000'), 'request.headers.x-a', /control characters/],
    ['request.headers', headerWith('x-a', '€'), 'request.headers.x-a', /above U\+00FF/],
    [
      'request.headers',
      headerWith('Content-Length', '9'),
      'request.headers.Content-Length',
      /set by the HTTP client/,
    ],
    [
      'request.headers',
      headerWith('transfer-encoding', 'chunked'),
      'request.headers.transfer-encoding',
      /HTTP client/,
    ],
    ['request.headers', headerWith('Connection', 'close'), 'request.headers.Connection', /HTTP client/],
    [
      'request.headers',
      headerWith('Content-Type', 'text/plain'),
      'request.headers.Content-Type',
      /duplicates header "content-type"/,
    ],
    [
      'request.headers',
      headerWith('x'.repeat(257), 'v'),
      `request.headers.${'x'.repeat(257)}`,
      /longer than 256/,
    ],
    [
      'request.headers',
      manyHeaders(maxHeaderCount + 1),
      'request.headers',
      /too many headers: 101 \(at most 100\)/,
    ],
    ['request.headers', { a: 'x'.repeat(maxHeadersBytes) }, 'request.headers', /over the limit of 65536/],
    // meta.requestId
    ['meta.requestId', REMOVE, 'meta.requestId', /^required$/],
    ['meta.requestId', '', 'meta.requestId', /must not be empty/],
    ['meta.requestId', 42, 'meta.requestId', /expected string, received 42/],
    ['meta.requestId', null, 'meta.requestId', /expected string, received null/],
    ['meta.requestId', 'x'.repeat(257), 'meta.requestId', /at most 256 characters/],
    ['meta.requestId', 'ord 42', 'meta.requestId', /printable ASCII without spaces/],
    ['meta.requestId', 'заказ-42', 'meta.requestId', /printable ASCII/],
    ['meta.requestId', 'a\nb', 'meta.requestId', /printable ASCII/],
    // meta.traceparent
    ['meta.traceparent', 'abc', 'meta.traceparent', /invalid W3C traceparent/],
    ['meta.traceparent', `00-${traceId.toUpperCase()}-${parentId}-01`, 'meta.traceparent', /lower-case hex/],
    ['meta.traceparent', `ff-${traceId}-${parentId}-01`, 'meta.traceparent', /version ff is forbidden/],
    [
      'meta.traceparent',
      `00-${'0'.repeat(32)}-${parentId}-01`,
      'meta.traceparent',
      /trace-id must not be all zeros/,
    ],
    [
      'meta.traceparent',
      `00-${traceId}-${'0'.repeat(16)}-01`,
      'meta.traceparent',
      /parent-id must not be all zeros/,
    ],
    ['meta.traceparent', `00-${traceId}-${parentId}-01-x`, 'meta.traceparent', /version 00 has exactly four/],
    ['meta.traceparent', `00-${traceId}a-${parentId}-01`, 'meta.traceparent', /invalid W3C traceparent/],
    ['meta.traceparent', 1, 'meta.traceparent', /expected string/],
    // meta.partition
    ['meta.partition', '!', 'meta.partition', /needs a key after "!"/],
    ['meta.partition', '', 'meta.partition', /must not be empty/],
    ['meta.partition', 'order 42', 'meta.partition', /printable ASCII/],
    ['meta.partition', `!${'x'.repeat(256)}`, 'meta.partition', /at most 256 characters/],
    ['meta.partition', 42, 'meta.partition', /expected string, received 42/],
    // meta.sync
    ['meta.sync', 'true', 'meta.sync', /expected boolean, received string "true"/],
    ['meta.sync', 1, 'meta.sync', /expected boolean, received 1/],
    // meta.scheduled
    ['meta.scheduled', '2026-12-01T09:00:00', 'meta.scheduled', /invalid RFC 3339 time/],
    ['meta.scheduled', '2026-12-01', 'meta.scheduled', /invalid RFC 3339 time/],
    ['meta.scheduled', 'tomorrow', 'meta.scheduled', /invalid RFC 3339 time "tomorrow"/],
    ['meta.scheduled', '2026-02-30T09:00:00Z', 'meta.scheduled', /day 30 does not exist/],
    ['meta.scheduled', '2026-12-01T25:00:00Z', 'meta.scheduled', /hour 25/],
    ['meta.scheduled', 1796115600000, 'meta.scheduled', /expected string, received 1796115600000/],
    // before the Unix epoch, or past what RFC 3339 writes in UTC: the queue cannot hold them
    [
      'meta.scheduled',
      '0000-01-01T00:00:00Z',
      'meta.scheduled',
      /outside the instants the service can hold \(1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z\)/,
    ],
    ['meta.scheduled', '1969-12-31T23:59:59.999Z', 'meta.scheduled', /outside the instants/],
    ['meta.scheduled', '1970-01-01T00:00:00+00:01', 'meta.scheduled', /outside the instants/],
    ['meta.scheduled', '9999-12-31T23:59:59-00:01', 'meta.scheduled', /outside the instants/],
    ['createdAt', '1900-01-01T00:00:00Z', 'createdAt', /outside the instants/],
    // meta.proxyData
    [
      'meta.proxyData',
      'x'.repeat(maxProxyDataBytes),
      'meta.proxyData',
      /65538 bytes as JSON, over the limit of 65536/,
    ],
    [
      'meta.proxyData',
      { big: 'é'.repeat(maxProxyDataBytes / 2) },
      'meta.proxyData',
      /over the limit of 65536/,
    ],
    ['meta.proxyData', () => 1, 'meta.proxyData', /must be a JSON value/],
    ['meta.proxyData', nested(65), 'meta.proxyData', /deeper than the limit of 64 levels/],
    // JSON.parse reads these as ±Infinity (written back as null) or a rounded double: refused, not changed
    [
      'meta.proxyData',
      { n: JSON.parse('1e999999') },
      'meta.proxyData',
      /would not come back as written \(Infinity\)/,
    ],
    ['meta.proxyData', [1, { m: JSON.parse('-1e400') }], 'meta.proxyData', /\(-Infinity\)/],
    [
      'meta.proxyData',
      JSON.parse('{"big":123456789012345678901234567890}'),
      'meta.proxyData',
      /not come back as written .*within ±9007199254740991; send larger ones as strings/,
    ],
    // meta.timeout
    ['meta.timeout', '0s', 'meta.timeout', /must be at least 1ms/],
    ['meta.timeout', '-1s', 'meta.timeout', /must not be negative/],
    ['meta.timeout', 30, 'meta.timeout', /expected string/],
    // meta.concurrency
    ['meta.concurrency', 5, 'meta.concurrency', /expected object/],
    ['meta.concurrency', { limit: 1 }, 'meta.concurrency.key', /^required$/],
    ['meta.concurrency', { key: 'a' }, 'meta.concurrency.limit', /^required$/],
    ['meta.concurrency', { key: '', limit: 1 }, 'meta.concurrency.key', /must not be empty/],
    ['meta.concurrency', { key: 'k'.repeat(201), limit: 1 }, 'meta.concurrency.key', /at most 200/],
    ['meta.concurrency', { key: 'a b', limit: 1 }, 'meta.concurrency.key', /printable ASCII/],
    ['meta.concurrency', { key: 'a', limit: 0 }, 'meta.concurrency.limit', /must be >= 1/],
    ['meta.concurrency', { key: 'a', limit: -3 }, 'meta.concurrency.limit', /must be >= 1/],
    ['meta.concurrency', { key: 'a', limit: 10_001 }, 'meta.concurrency.limit', /must be <= 10000/],
    ['meta.concurrency', { key: 'a', limit: 1.5 }, 'meta.concurrency.limit', /integer/],
    ['meta.concurrency', { key: 'a', limit: 1, over: 1 }, 'meta.concurrency', /unknown key "over"/],
    // meta.limiter
    ['meta.limiter', 'partner-a', 'meta.limiter', /expected object/],
    ['meta.limiter.key', REMOVE, 'meta.limiter.key', /^required$/],
    ['meta.limiter.key', '', 'meta.limiter.key', /must not be empty/],
    [
      'meta.limiter.algorithm',
      'gcra',
      'meta.limiter.algorithm',
      /expected one of "token-bucket", .*received string "gcra"/,
    ],
    ['meta.limiter.algorithm', 'Token-Bucket', 'meta.limiter.algorithm', /expected one of/],
    ['meta.limiter.algorithm', REMOVE, 'meta.limiter.algorithm', /^required \(one of "token-bucket", /],
    ['meta.limiter.rates', REMOVE, 'meta.limiter.rates', /^needs at least one window, or a quota$/],
    ['meta.limiter.rates', [], 'meta.limiter.rates', /^needs at least one window, or a quota$/],
    [
      'meta.limiter.rates',
      Array.from({ length: 9 }, () => ({ duration: '1s', value: 1 })),
      'meta.limiter.rates',
      /at most 8 items/,
    ],
    ['meta.limiter.rates', { duration: '1s', value: 1 }, 'meta.limiter.rates', /expected array/],
    [
      'meta.limiter.rates.0.duration',
      '5x',
      'meta.limiter.rates.0.duration',
      /^invalid Go duration "5x": unknown unit "x"/,
    ],
    ['meta.limiter.rates.0.duration', '1d', 'meta.limiter.rates.0.duration', /unknown unit "d"/],
    ['meta.limiter.rates.0.duration', '10', 'meta.limiter.rates.0.duration', /missing unit/],
    ['meta.limiter.rates.0.duration', '', 'meta.limiter.rates.0.duration', /invalid Go duration ""/],
    ['meta.limiter.rates.0.duration', '0s', 'meta.limiter.rates.0.duration', /must be at least 1ms/],
    ['meta.limiter.rates.0.duration', '0', 'meta.limiter.rates.0.duration', /must be at least 1ms/],
    // the limiter counts whole milliseconds: a shorter window would be refused by the executor
    [
      'meta.limiter.rates.0.duration',
      '999us',
      'meta.limiter.rates.0.duration',
      /"999us" must be at least 1ms/,
    ],
    ['meta.limiter.rates.1.duration', '1ns', 'meta.limiter.rates.1.duration', /must be at least 1ms/],
    ['meta.limiter.rates.0.duration', '-1s', 'meta.limiter.rates.0.duration', /must not be negative/],
    ['meta.limiter.rates.0.duration', '3000000h', 'meta.limiter.rates.0.duration', /out of range/],
    [
      'meta.limiter.rates.0.duration',
      1000,
      'meta.limiter.rates.0.duration',
      /expected string, received 1000/,
    ],
    [
      'meta.limiter.rates.1.duration',
      `${'1'.repeat(64)}s`,
      'meta.limiter.rates.1.duration',
      /at most 64 characters/,
    ],
    ['meta.limiter.cost', 11, 'meta.limiter.cost', /must not exceed the smallest window's value \(11 > 10\)/],
    ['meta.limiter.cost', 0, 'meta.limiter.cost', /must be >= 1 \(received 0\)/],
    ['meta.limiter.cost', 2.5, 'meta.limiter.cost', /expected an integer, received 2.5/],
    ['meta.deadline', 'soon', 'meta.deadline', /RFC 3339 instant with offset .* or a Go duration/],
    ['meta.deadline', '500us', 'meta.deadline', /must be at least 1ms/],
    ['meta.limiter.rates.0.value', 0, 'meta.limiter.rates.0.value', /must be > 0 \(received 0\)/],
    ['meta.limiter.rates.0.value', -5, 'meta.limiter.rates.0.value', /must be > 0/],
    ['meta.limiter.rates.0.value', 1.5, 'meta.limiter.rates.0.value', /expected an integer, received 1.5/],
    [
      'meta.limiter.rates.0.value',
      '10',
      'meta.limiter.rates.0.value',
      /expected number, received string "10"/,
    ],
    ['meta.limiter.rates.1.value', REMOVE, 'meta.limiter.rates.1.value', /^required$/],
    // meta.retry
    ['meta.retry.max', REMOVE, 'meta.retry.max', /^required$/],
    ['meta.retry.max', 0, 'meta.retry.max', /must be >= 1 \(received 0\)/],
    ['meta.retry.max', 2.5, 'meta.retry.max', /expected an integer/],
    ['meta.retry.max', 101, 'meta.retry.max', /must be <= 100/],
    ['meta.retry.delay', '5x', 'meta.retry.delay', /invalid Go duration "5x"/],
    ['meta.retry.delay', '-200ms', 'meta.retry.delay', /must not be negative/],
    ['meta.retry.delay', 200, 'meta.retry.delay', /expected string, received 200/],
    ['meta.retry.maxDelay', '0s', 'meta.retry.maxDelay', /must be greater than 0/],
    [
      'meta.retry.maxDelay',
      '100ms',
      'meta.retry.maxDelay',
      /must not be shorter than delay \(100ms < 200ms\)/,
    ],
    ['meta.retry.multiplier', 0.5, 'meta.retry.multiplier', /must be >= 1/],
    ['meta.retry.multiplier', '2', 'meta.retry.multiplier', /expected number/],
    ['meta.retry.jitter', 1.5, 'meta.retry.jitter', /must be <= 1/],
    ['meta.retry.jitter', -0.1, 'meta.retry.jitter', /must be >= 0/],
    // meta.cache
    ['meta.cache.key', REMOVE, 'meta.cache.key', /^required$/],
    ['meta.cache.ttl', REMOVE, 'meta.cache.ttl', /^required$/],
    ['meta.cache.ttl', '0s', 'meta.cache.ttl', /must be greater than 0/],
    ['meta.cache.ttl', 'forever', 'meta.cache.ttl', /invalid Go duration "forever"/],
    ['meta.cache.ttl', 300, 'meta.cache.ttl', /expected string/],
    // meta.signing
    ['meta.signing', { keyId: '' }, 'meta.signing.keyId', /must not be empty/],
    ['meta.signing', {}, 'meta.signing.keyId', /^required$/],
    ['meta.signing', { keyId: 'k'.repeat(129) }, 'meta.signing.keyId', /at most 128 characters/],
    // service-set fields
    ['tryCount', -1, 'tryCount', /must be >= 0 \(received -1\)/],
    ['tryCount', 1.5, 'tryCount', /expected an integer/],
    ['tryCount', '1', 'tryCount', /expected number/],
    ['retryBase', 1, 'retryBase', /must not exceed tryCount/],
    ['tryCount', 2 ** 31 - 100, 'tryCount', /must be <= 2147483547/],
    // attempts already made must leave one to make (meta.retry.max is 5 in the example)
    ['tryCount', 5, 'tryCount', /leaves no attempt to make: 5 attempts already made, 5 allowed/],
    ['tryCount', 1000, 'tryCount', /leaves no attempt to make/],
    ['retryBase', -1, 'retryBase', /must be >= 0/],
    ['createdAt', 'yesterday', 'createdAt', /invalid RFC 3339 time/],
    ['createdAt', '2026-11-30 06:00:00Z', 'createdAt', /invalid RFC 3339 time/],
  ])('%s = %j → %s', (path, value, issuePath, message) => {
    expectIssue(withField(path, value), issuePath, message);
  });

  it.each([null, 'x', 42, [], true, undefined])('refuses a non-object envelope %j', (input) => {
    expectIssue(input, '', /expected object|^required$/);
  });
});

describe('error reporting', () => {
  it('reports every bad field at once, each by its path', () => {
    const input = designRequestExample() as Record<string, unknown> & ReturnType<typeof designRequestExample>;
    input.meta.limiter.rates[0] = { duration: '5x', value: 10 };
    input.meta.limiter.algorithm = 'gcra';
    (input.meta as Record<string, unknown>).requestId = undefined;
    input.request.uri = 'ftp://x';
    const result = safeParseRequestEnvelope(input);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.issues.map((i) => i.path).sort()).toEqual([
      'meta.limiter.algorithm',
      'meta.limiter.rates.0.duration',
      'meta.requestId',
      'request.uri',
    ]);
    expect(result.error.message).toContain('meta.limiter.rates.0.duration: invalid Go duration "5x"');
  });

  it('parseRequestEnvelope throws a ValidationError with code invalid_request', () => {
    let caught: unknown;
    try {
      parseRequestEnvelope(withField('meta.requestId', REMOVE));
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).code).toBe('invalid_request');
    expect((caught as ValidationError).issues).toEqual([{ path: 'meta.requestId', message: 'required' }]);
  });

  it('never throws anything but a ValidationError, whatever the input', () => {
    fc.assert(
      fc.property(fc.anything(), (input) => {
        const result = safeParseRequestEnvelope(input);
        if (!result.ok) expect(result.error).toBeInstanceOf(ValidationError);
      }),
    );
  });

  it('meta.concurrency: accepted exactly when its key is printable, 1-200 chars, and its limit 1-10,000', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 220 }), fc.stringMatching(/^[!-~]{1,210}$/)),
        fc.oneof(fc.integer({ min: -5, max: 10_005 }), fc.double(), fc.constant('3')),
        (key, limit) => {
          const result = safeParseRequestEnvelope(withField('meta.concurrency', { key, limit }));
          const keyOk = /^[!-~]{1,200}$/.test(key);
          const limitOk = Number.isInteger(limit) && (limit as number) >= 1 && (limit as number) <= 10_000;
          expect(result.ok).toBe(keyOk && limitOk);
          if (!result.ok) expect(result.error.issues[0]?.path).toMatch(/^meta\.concurrency\.(key|limit)$/);
        },
      ),
    );
  });

  it('meta.limiter beside meta.destination: accepted and kept, whatever valid limit the caller asks', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[!-~]{1,100}$/),
        fc.constantFrom(...LIMITER_ALGORITHMS),
        fc.integer({ min: 1, max: 1_000 }),
        (key, algorithm, value) => {
          const limiter = { key, algorithm, rates: [{ duration: '1s', value }] };
          const result = safeParseRequestEnvelope({
            request: { uri: '/invoices?x=1' },
            meta: { requestId: 'r1', destination: 'partner-billing', limiter },
          });
          expect(result.ok).toBe(true);
          if (result.ok) expect(result.value.meta.limiter).toMatchObject(limiter);
        },
      ),
    );
  });

  it('meta.priority: accepted exactly when an integer from -10 to 10', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: -15, max: 15 }), fc.double(), fc.constant('3'), fc.constant(null)),
        (priority) => {
          const result = safeParseRequestEnvelope(withField('meta.priority', priority));
          const ok = Number.isInteger(priority) && (priority as number) >= -10 && (priority as number) <= 10;
          expect(result.ok).toBe(ok);
          if (!result.ok) expect(result.error.issues[0]?.path).toBe('meta.priority');
        },
      ),
    );
  });

  it('does not echo a huge body into the message', () => {
    const result = safeParseRequestEnvelope(withField('meta.requestId', 'x'.repeat(10_000)));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.message.length).toBeLessThan(200);
  });
});

describe('createRequestContract (custom limits)', () => {
  const contract = createRequestContract({ maxBodyBytes: 16, maxHeaderCount: 2, maxProxyDataBytes: 32 });

  it('applies its own limits', () => {
    const result = contract.safeParse(withField('request.body', 'x'.repeat(17)));
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.error.issues[0]).toMatchObject({ path: 'request.body', message: /limit of 16 bytes/ });
    expect(() => contract.parse(withField('request.headers', manyHeaders(3)))).toThrow(/at most 2/);
    expect(() => contract.parse(withField('meta.proxyData', { a: 'x'.repeat(40) }))).toThrow(/limit of 32/);
  });

  it('leaves the default contract alone', () => {
    expectValid(withField('request.body', 'x'.repeat(17)));
  });
});

describe('helpers', () => {
  it('isOrderedPartition: a leading ! means ordered', () => {
    expect(isOrderedPartition('!order-42')).toBe(true);
    expect(isOrderedPartition('order-42')).toBe(false);
    expect(isOrderedPartition('a!b')).toBe(false);
    expect(isOrderedPartition(undefined)).toBe(false);
  });

  it('kafkaKeyFor: the partition when set, else the requestId', () => {
    expect(kafkaKeyFor(parseRequestEnvelope(designRequestExample()))).toBe('!order-42');
    expect(kafkaKeyFor(parseRequestEnvelope(withField('meta.partition', REMOVE)))).toBe('ord-42-create');
  });

  it('isWakeUp: only an empty uri', () => {
    expect(isWakeUp(parseRequestEnvelope(designRequestExample()))).toBe(false);
    expect(isWakeUp(parseRequestEnvelope(withField('request.uri', '')))).toBe(true);
  });

  it('attemptsInBudget: attempts counted from the retryBase a replay set', () => {
    expect(attemptsInBudget({}, 3)).toBe(3);
    expect(attemptsInBudget({ retryBase: 5 }, 7)).toBe(2);
    expect(attemptsInBudget({ retryBase: 5 }, 5)).toBe(0);
  });
});

describe('nesting depth', () => {
  // Deep enough to overflow JSON.stringify (and Python's json): refused for its depth, not as "not JSON".
  it.each([
    ['10 000 levels', nested(10_000)],
    ['1 000 000 levels', nested(1_000_000)],
    ['a cycle', cyclic()],
  ])('proxyData of %s is refused with a message naming the limit', (_, proxyData) => {
    expectIssue(
      withField('meta.proxyData', proxyData),
      'meta.proxyData',
      /deeper than the limit of 64 levels/,
    );
  });

  it('deep nesting anywhere else is refused without recursing into it', () => {
    const deep = nested(1_000_000);
    for (const path of [
      'extra',
      'meta.extra',
      'request',
      'request.headers',
      'meta.retry',
      'meta.limiter.rates',
    ])
      expect(safeParseRequestEnvelope(withField(path, deep)).ok).toBe(false);
  });
});

describe('the attempt counters leave an attempt to make', () => {
  const envelope = (counters: { tryCount?: number; retryBase?: number }, retry?: { max: number }) => ({
    request: { uri: 'http://x.example/' },
    meta: { requestId: 'r', ...(retry ? { retry } : {}) },
    ...counters,
  });

  it('counts the budget from retryBase, 1 attempt without meta.retry', () => {
    expectValid(envelope({ tryCount: 2 }, { max: 3 }));
    expectIssue(envelope({ tryCount: 3 }, { max: 3 }), 'tryCount', /3 attempts already made, 3 allowed/);
    expectValid(envelope({ tryCount: 1000, retryBase: 998 }, { max: 3 }));
    expectIssue(envelope({ tryCount: 1000, retryBase: 997 }, { max: 3 }), 'tryCount', /1000 − retryBase 997/);
    expectValid(envelope({ tryCount: 0 }));
    expectIssue(envelope({ tryCount: 1 }), 'tryCount', /1 allowed/);
    expectValid(envelope({ tryCount: 7, retryBase: 7 }));
  });
});
