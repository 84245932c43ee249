import { createHash } from 'node:crypto';
import { createServer } from 'node:net';
import { createKafka } from '@requester/shared/kafka';
import { createLogger, type Logger } from '@requester/shared/log';
import { describe, expect, it, vi } from 'vitest';
import { silent } from '../../test/kit.fixture.ts';
import { KeyAccess, openAccess } from '../auth/index.ts';
import { Hub } from '../hub/index.ts';
import type { KeyRecord } from '../keys/index.ts';
import { kafkaSubmit } from '../submit/index.ts';
import { type ApiParts, createApi, retryAfterSeconds } from './index.ts';

const SETTINGS = {
  maxBodyBytes: 64 * 1024,
  syncTimeoutMs: 1_000,
  longPollMaxMs: 5_000,
  access: openAccess(), // AUTH=off: these tests are about the API itself (auth/ tests the keys)
};
const VALID = { request: { uri: 'https://example.test/x' }, meta: { requestId: 'r-1' } };

function api(parts: ApiParts = {}) {
  return createApi(parts, SETTINGS, silent);
}

const post = (body: string, headers: Record<string, string> = {}) => ({
  method: 'POST',
  body,
  headers: { 'content-type': 'application/json', ...headers },
});

/** A port nothing listens on: bound, read, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('POST /request: meta.deadline', () => {
  it('writes a duration deadline as the instant it resolves to, counted from createdAt', async () => {
    const sent: string[] = [];
    const app = api({ submit: async (_key, value) => void sent.push(value) });
    const body = { ...VALID, meta: { ...VALID.meta, deadline: '30s' } };
    expect((await app.request('/request', post(JSON.stringify(body)))).status).toBe(202);
    const copy = JSON.parse(sent[0] ?? '{}') as { createdAt: string; meta: { deadline: string } };
    expect(Date.parse(copy.meta.deadline) - Date.parse(copy.createdAt)).toBe(30_000);
  });

  it('answers 400 for a deadline already past, and for a scheduled time after the deadline', async () => {
    const sent: string[] = [];
    const app = api({ submit: async (_key, value) => void sent.push(value) });
    const cases = [
      [{ deadline: '2020-01-01T00:00:00Z' }, 'meta.deadline', /is in the past/],
      [
        { deadline: '1m', scheduled: new Date(Date.now() + 3_600_000).toISOString() },
        'meta.scheduled',
        /after meta.deadline/,
      ],
    ] as const;
    for (const [meta, path, message] of cases) {
      const body = { ...VALID, meta: { ...VALID.meta, ...meta } };
      const res = await app.request('/request', post(JSON.stringify(body)));
      expect(res.status, path).toBe(400);
      const problem = (await res.json()) as {
        code: string;
        issues: Array<{ path: string; message: string }>;
      };
      expect(problem.code).toBe('invalid_request');
      expect(problem.issues).toEqual([{ path, message: expect.stringMatching(message) }]);
    }
    expect(sent).toEqual([]);
  });
});

describe('POST /request refusals', () => {
  const parts: ApiParts = { submit: async () => {} };

  it('answers 400 with a problem body for malformed JSON', async () => {
    const res = await api(parts).request('/request', post('{"request":'));
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(await res.json()).toMatchObject({
      status: 400,
      code: 'invalid_request',
      detail: /malformed JSON/,
    });
  });

  it('answers 400 naming every bad field', async () => {
    const body = JSON.stringify({ request: { uri: 'ftp://x', method: 'get' }, meta: { retires: 3 } });
    const res = await api(parts).request('/request', post(body));
    expect(res.status).toBe(400);
    const problem = (await res.json()) as {
      detail: string;
      issues: Array<{ path: string; message: string }>;
    };
    const paths = problem.issues.map((i) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining(['request.uri', 'request.method', 'meta.requestId', 'meta']),
    );
    expect(problem.detail).toContain('meta.requestId: required');
    expect(problem.detail).toContain('retires');
  });

  it('answers 415 unless the body is declared JSON: no cross-site form or text/plain submission', async () => {
    const refused = ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded'];
    refused.push('multipart/form-data; boundary=x', 'application/jsonp');
    for (const type of refused) {
      const res = await api(parts).request('/request', post(JSON.stringify(VALID), { 'content-type': type }));
      expect(res.status, type).toBe(415);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(await res.json()).toMatchObject({ status: 415, code: 'unsupported_media_type' });
    }
    const bare = await api(parts).request('/request', {
      method: 'POST',
      body: new Blob([JSON.stringify(VALID)]),
    });
    expect(bare.status).toBe(415);
    for (const type of ['application/json', 'Application/JSON; charset=utf-8', 'application/vnd.x+json']) {
      const res = await api(parts).request('/request', post(JSON.stringify(VALID), { 'content-type': type }));
      expect(res.status, type).toBe(202);
    }
  });

  // Each was answered 202, then refused downstream on every attempt (queue, executor) or made a call too many.
  it.each([
    ['a scheduled instant before 1970', { scheduled: '0000-01-01T00:00:00Z' }, {}, 'meta.scheduled'],
    [
      'a limiter window under 1 ms',
      { limiter: { key: 'k', algorithm: 'token-bucket', rates: [{ duration: '999us', value: 1 }] } },
      {},
      'meta.limiter.rates.0.duration',
    ],
    ['a tryCount past the retry budget', { retry: { max: 3 } }, { tryCount: 1000 }, 'tryCount'],
    [
      'proxyData nested past 64 levels',
      { proxyData: JSON.parse(`${'['.repeat(65)}${']'.repeat(65)}`) },
      {},
      'meta.proxyData',
    ],
  ])('answers 400 for %s, naming the field', async (_, meta, extra, field) => {
    const body = JSON.stringify({ ...VALID, meta: { ...VALID.meta, ...meta }, ...extra });
    const res = await api(parts).request('/request', post(body));
    expect(res.status).toBe(400);
    const problem = (await res.json()) as { issues: Array<{ path: string; message: string }> };
    expect(problem.issues.map((i) => i.path)).toEqual([field]);
  });

  it('answers 400 naming the depth limit, not a crash, for a body nested a million levels deep', async () => {
    const deep = `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`;
    const deepProxyData = JSON.stringify(VALID).replace('"meta":{', `"meta":{"proxyData":${deep},`);
    const roomy = createApi(parts, { ...SETTINGS, maxBodyBytes: 4 << 20 }, silent);
    expect((await roomy.request('/request', post(deep))).status).toBe(400);
    const res = await roomy.request('/request', post(deepProxyData));
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      detail: /meta\.proxyData: nests objects\/arrays deeper than the limit of 64 levels/,
    });
  });

  it('answers 413 above the body limit', async () => {
    const big = JSON.stringify({ ...VALID, pad: 'x'.repeat(SETTINGS.maxBodyBytes) });
    const res = await api(parts).request('/request', post(big));
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: 'payload_too_large' });
  });

  it('answers 503 + Retry-After, and accepts nothing, when Kafka does not acknowledge', async () => {
    const kafka = createKafka({
      brokers: `127.0.0.1:${await closedPort()}`,
      clientId: 'closed',
      logger: silent,
    });
    const producer = kafka.producer();
    const connecting = producer.connect();
    connecting.catch(() => {});
    const submit = kafkaSubmit(() => connecting.then(() => producer), 't-never.in', 300);
    const hub = new Hub<string>({ maxBytes: 1 << 20, ttlMs: 60_000 });
    for (const sync of [false, true]) {
      const body = JSON.stringify({ ...VALID, meta: { ...VALID.meta, sync } });
      const res = await api({ submit, hub }).request('/request', post(body));
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(await res.json()).toMatchObject({ code: 'dependency_unavailable' });
    }
    expect(hub.waiting()).toBe(0); // the sync waiter was dropped with the refusal
    await producer.disconnect().catch(() => {});
  });
});

describe('request bodies in flight', () => {
  it('holds at most maxBodyBytesInFlight of bodies at once, answering 503 past it, until Kafka has them', async () => {
    let release!: () => void;
    const kafkaBusy = new Promise<void>((resolve) => {
      release = resolve;
    });
    let reached!: () => void;
    const submitting = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const submit = () => {
      reached();
      return kafkaBusy;
    };
    const app = createApi({ submit }, { ...SETTINGS, maxBodyBytesInFlight: 1_000 }, silent);
    const body = (id: string) =>
      JSON.stringify({ ...VALID, meta: { requestId: id, proxyData: 'x'.repeat(500) } }); // ~600 bytes
    const first = app.request('/request', post(body('held')));
    await submitting; // its body is read, and Kafka has not acknowledged it yet
    const refused = await app.request('/request', post(body('refused')));
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({ code: 'overloaded' });
    release();
    expect((await first).status).toBe(202);
    expect((await app.request('/request', post(body('after')))).status).toBe(202); // given back
  });
});

describe('requestId claims', () => {
  it('answers 409 to a conflicting requestId and 503 when the check cannot be made, producing nothing', async () => {
    const produced: string[] = [];
    const submit = async (key: string) => {
      produced.push(key);
    };
    const conflict = await api({ submit, claim: async () => 'conflict' }).request(
      '/request',
      post(JSON.stringify(VALID)),
    );
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({ code: 'request_id_conflict' });
    const down = await api({
      submit,
      claim: async () => {
        throw new Error('Redis is away');
      },
    }).request('/request', post(JSON.stringify(VALID)));
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(produced).toEqual([]);
    const same = await api({ submit, claim: async () => 'same' }).request(
      '/request',
      post(JSON.stringify(VALID)),
    );
    expect(same.status).toBe(202);
    expect(produced).toEqual(['r-1']);
  });
});

describe('routing and correlation', () => {
  it('answers with the x-request-id the caller gave (request-id/)', async () => {
    const app = api({ submit: async () => {} });
    const given = await app.request('/request', post(JSON.stringify(VALID), { 'x-request-id': 'corr-7' }));
    expect(given.status).toBe(202);
    expect(given.headers.get('x-request-id')).toBe('corr-7');
    expect(await given.json()).toEqual({ requestId: 'r-1' });
  });

  it('says which role serves a route that does not run here', async () => {
    const onlyGateway = api({ hub: new Hub<string>({ maxBytes: 1 << 20, ttlMs: 1 }) });
    const post404 = await onlyGateway.request('/request', post(JSON.stringify(VALID)));
    expect(post404.status).toBe(404);
    expect(await post404.json()).toMatchObject({ detail: /ingress role/ });
    const onlyIngress = api({ submit: async () => {} });
    const get404 = await onlyIngress.request('/requests/x');
    expect(await get404.json()).toMatchObject({ detail: /sync-gateway role/ });
  });

  it('answers a long-poll 503 + Retry-After once SYNC_MAX_WAITERS callers wait, unless its result is kept', async () => {
    const hub = new Hub<string>({ maxBytes: 1 << 20, ttlMs: 60_000, maxWaiters: 1 });
    const app = api({ hub });
    const first = app.request('/requests/a?wait=5s');
    const crowded = await app.request('/requests/b?wait=5s');
    expect(crowded.status).toBe(503);
    expect(crowded.headers.get('retry-after')).toBe('1');
    expect(await crowded.json()).toMatchObject({ code: 'overloaded' });
    expect((await app.request('/requests/b')).status).toBe(404); // no wait asked: nothing to hold
    hub.publish('kept', '{"kept":true}');
    expect((await app.request('/requests/kept?wait=5s')).status).toBe(200);
    hub.publish('a', '{"a":true}');
    expect((await first).status).toBe(200);
  });

  it('refuses a wait that is not a Go duration, naming the parameter', async () => {
    const res = await api({ hub: new Hub<string>({ maxBytes: 1 << 20, ttlMs: 1 }) }).request(
      '/requests/x?wait=soon',
    );
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ issues: [{ path: 'wait' }] });
  });
});

/** The service's own logger (its redaction included), its raw JSON lines captured in order. */
function capturedLogger(level = 'info'): { logger: Logger; raw: string[]; lines: () => LoggedLine[] } {
  const raw: string[] = [];
  const logger = createLogger({ level, destination: { write: (line: string) => void raw.push(line) } });
  return { logger, raw, lines: () => raw.map((line) => JSON.parse(line) as LoggedLine) };
}

type LoggedLine = Record<string, unknown>;

/** AUTH=on with one key in memory: `billing`, whose token is TOKEN. */
const SECRET = 'S'.repeat(43);
const TOKEN = `rqk_abcdefabcdef_${SECRET}`;
function keyAccess() {
  const record: KeyRecord = {
    id: 'abcdefabcdef',
    name: 'billing',
    secretHash: createHash('sha256').update(SECRET).digest(),
    sync: false,
    schedule: false,
    kafkaEntry: false,
    createdAt: new Date(0),
  };
  return new KeyAccess({
    find: async (id) => (id === record.id ? record : undefined),
    cacheTtlMs: 60_000,
    horizonMs: 60_000,
    limiter: () => {
      throw new Error('no rate here');
    },
  });
}

describe('logging', () => {
  it("logs each request with its x-request-id, the task's requestId and the serving role", async () => {
    const { logger, lines } = capturedLogger();
    const app = createApi(
      { submit: async () => {}, ingressLog: logger.child({ role: 'ingress' }) },
      SETTINGS,
      logger.child({ role: 'base' }),
    );
    await app.request('/request', post(JSON.stringify(VALID), { 'x-request-id': 'corr-9' }));
    expect(lines()).toEqual([
      expect.objectContaining({
        role: 'ingress',
        httpRequestId: 'corr-9',
        requestId: 'r-1',
        route: '/request',
        status: 202,
        msg: 'http request',
      }),
    ]);
  });

  it('writes the access line exactly as a child logger with the same bindings would', async () => {
    const { logger, raw } = capturedLogger();
    const ingressLog = logger.child({ role: 'ingress' });
    const app = createApi(
      { submit: async () => {}, ingressLog },
      { ...SETTINGS, access: keyAccess() },
      logger,
    );
    // Served by the ingress role (with a requestId); refused before it (bad JSON, no key).
    await app.request(
      '/request',
      post(JSON.stringify(VALID), { 'x-request-id': 'c-1', authorization: `Bearer ${TOKEN}` }),
    );
    await app.request('/request', post('{', { 'x-request-id': 'c-2', authorization: `Bearer ${TOKEN}` }));
    await app.request('/request', post('{', { 'x-request-id': 'c-3' }));
    const withoutTime = (line: string | undefined) => line?.replace(/"time":"[^"]*"/, '"time":"-"');
    const ms = (i: number) => (JSON.parse(raw[i] as string) as { ms: number }).ms;
    ingressLog
      .child({ httpRequestId: 'c-1' })
      .child({ client: 'billing' })
      .child({ requestId: 'r-1' })
      .info({ method: 'POST', route: '/request', status: 202, ms: ms(0) }, 'http request');
    logger
      .child({ httpRequestId: 'c-2' })
      .child({ client: 'billing' })
      .info({ method: 'POST', route: '/request', status: 400, ms: ms(1) }, 'http request');
    logger
      .child({ httpRequestId: 'c-3' })
      .info({ method: 'POST', route: '/request', status: 401, ms: ms(2) }, 'http request');
    expect(raw).toHaveLength(6);
    for (let i = 0; i < 3; i++) expect(withoutTime(raw[i])).toBe(withoutTime(raw[i + 3]));
    expect(raw.join('')).not.toContain(SECRET);
  });

  it('carries requestId, httpRequestId, client and role on the lines written while serving', async () => {
    const { logger, lines } = capturedLogger();
    const app = createApi(
      {
        submit: async () => {
          throw new Error('broker down');
        },
        ingressLog: logger.child({ role: 'ingress' }),
      },
      { ...SETTINGS, access: keyAccess() },
      logger,
    );
    const res = await app.request(
      '/request',
      post(JSON.stringify(VALID), { 'x-request-id': 'corr-7', authorization: `Bearer ${TOKEN}` }),
    );
    expect(res.status).toBe(503);
    const bound = { role: 'ingress', httpRequestId: 'corr-7', client: 'billing', requestId: 'r-1' };
    expect(lines()).toEqual([
      expect.objectContaining({ ...bound, level: 'warn', msg: expect.stringContaining('Kafka did not') }),
      expect.objectContaining({ ...bound, level: 'warn', status: 503, msg: 'http request' }),
    ]);
  });

  it('makes no child logger for a request that writes no line', async () => {
    const { logger, raw } = capturedLogger('warn');
    const ingressLog = logger.child({ role: 'ingress' });
    const children = [vi.spyOn(logger, 'child'), vi.spyOn(ingressLog, 'child')];
    const app = createApi(
      { submit: async () => {}, ingressLog },
      { ...SETTINGS, access: keyAccess() },
      logger,
    );
    const res = await app.request(
      '/request',
      post(JSON.stringify(VALID), { authorization: `Bearer ${TOKEN}` }),
    );
    expect(res.status).toBe(202);
    expect(raw).toEqual([]);
    for (const child of children) expect(child).not.toHaveBeenCalled();
  });
});

describe('retryAfterSeconds', () => {
  const result = (status: number, waitTime: number, headers: Record<string, string> = {}) =>
    JSON.stringify({ response: { status, body: '', headers }, meta: { requestId: 'r', waitTime } });

  it('rounds the limiter wait up to whole seconds', () => {
    expect(retryAfterSeconds(result(200, 1_500_000_000))).toBe(2);
    expect(retryAfterSeconds(result(200, 1))).toBe(1);
    expect(retryAfterSeconds(result(200, 0))).toBeUndefined();
  });

  it("falls back to the target's Retry-After on a 429", () => {
    expect(retryAfterSeconds(result(429, 0, { 'Retry-After': '7' }))).toBe(7);
    expect(retryAfterSeconds(result(429, 3_000_000_000, { 'retry-after': '7' }))).toBe(3);
    expect(retryAfterSeconds(result(429, 0))).toBeUndefined();
    expect(retryAfterSeconds(result(503, 0, { 'retry-after': '7' }))).toBeUndefined();
  });
});
