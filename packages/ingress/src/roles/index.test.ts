import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { type ConfigOverrides, loadConfig } from '@requester/shared/config';
import { buildResult } from '@requester/shared/contract';
import { createRedis } from '@requester/shared/redis';
import { REPLY_TO_HEADER, replyChannel, resultKey } from '@requester/shared/replies';
import { Dependencies, type RoleHandle } from '@requester/shared/role';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BROKERS, closeProducer, reader, send, silent, topics, unique } from '../../test/kit.fixture.ts';
import { type HttpRoleHandle, ingressRole, syncGatewayRole } from './index.ts';

type RoleName = 'ingress' | 'sync-gateway';
const ROLES = { ingress: ingressRole, 'sync-gateway': syncGatewayRole };
const running: Array<() => Promise<void>> = [];

/** Starts roles the way the CLI does: one Dependencies per process, phases on stop. */
async function startRoles(
  names: RoleName[],
  overrides: ConfigOverrides = {},
  shared?: { in: string; out: string },
) {
  const topicNames = shared ?? (await topics());
  const config = loadConfig(
    {},
    {
      kafkaBrokers: BROKERS,
      topicIn: topicNames.in,
      topicOut: topicNames.out,
      createTopics: 'false',
      httpHost: '127.0.0.1',
      httpPort: '0',
      logLevel: 'silent',
      redisPrefix: unique('ing'),
      auth: 'off', // explicit: these tests are about the roles; auth/index.test.ts covers the keys
      ...overrides,
    },
  );
  const deps = new Dependencies(config, silent);
  const handles: HttpRoleHandle[] = [];
  for (const name of names) handles.push(await ROLES[name].start({ config, logger: silent, deps }));
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      await Promise.all(handles.map((h: RoleHandle) => h.stopAccepting?.()));
      await Promise.all(handles.map((h) => h.drain()));
      await deps.close();
    })();
    return stopping;
  };
  running.push(stop);
  return { url: handles[0]!.url, handles, topics: topicNames, stop, prefix: config.redisPrefix };
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((stop) => stop()));
});
afterAll(closeProducer);

const postJson = (url: string, body: unknown) =>
  fetch(`${url}/request`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/;

describe('ingress', () => {
  it('writes the validated, stamped envelope to in, keyed by partition else requestId, then answers 202', async () => {
    const { url, topics: t } = await startRoles(['ingress']);
    const seen = await reader(t.in);
    try {
      const withPartition = {
        request: { uri: 'https://api.example.test/orders', method: 'POST', body: '{"id":42}' },
        meta: { requestId: 'ord-42', partition: '!order-42', proxyData: { tenant: 't1' } },
        tryCount: 9,
        retryBase: 9,
        createdAt: '2000-01-01T00:00:00Z',
      };
      const before = Date.now();
      const res = await postJson(url, withPartition);
      expect(res.status).toBe(202);
      expect(await res.json()).toEqual({ requestId: 'ord-42' });

      const record = await seen.next();
      expect(record.key).toBe('!order-42');
      const value = JSON.parse(record.value);
      // The exact envelope: defaults applied, traceparent and createdAt stamped, tryCount and retryBase dropped.
      expect(value).toEqual({
        request: withPartition.request,
        meta: { ...withPartition.meta, traceparent: expect.stringMatching(TRACEPARENT) },
        createdAt: expect.stringMatching(RFC3339_UTC),
      });
      expect(Date.parse(value.createdAt)).toBeGreaterThanOrEqual(before - 1);

      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const plain = { request: { uri: '' }, meta: { requestId: 'wake-1', traceparent } };
      expect((await postJson(url, plain)).status).toBe(202);
      const second = await seen.next();
      expect(second.key).toBe('wake-1');
      expect(JSON.parse(second.value)).toEqual({
        request: { uri: '', method: 'GET' },
        meta: { requestId: 'wake-1', traceparent },
        createdAt: expect.stringMatching(RFC3339_UTC),
      });
    } finally {
      await seen.close();
    }
  });

  it('refuses an oversize body with 413 while reading it, chunked or declared', async () => {
    const { url } = await startRoles(['ingress'], { maxBodyBytes: '1000' });
    const big = JSON.stringify({
      request: { uri: '' },
      meta: { requestId: 'big', proxyData: 'x'.repeat(50_000) },
    });
    for (const chunked of [true, false]) {
      const status = await new Promise<number>((resolve, reject) => {
        const headers = { 'content-type': 'application/json' };
        const req = httpRequest(`${url}/request`, { method: 'POST', headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        if (!chunked) req.setHeader('content-length', Buffer.byteLength(big));
        // Written in pieces: the server must answer without waiting for the rest.
        for (let i = 0; i < big.length; i += 1000) req.write(big.slice(i, i + 1000));
        req.end();
      });
      expect(status).toBe(413);
    }
  });

  it('answers 409 to a different request reusing a requestId, on every instance; an identical retry stays 202', async () => {
    const redisPrefix = unique('rid');
    const [one, two] = [
      await startRoles(['ingress'], { redisPrefix }),
      await startRoles(['ingress'], { redisPrefix }),
    ];
    const id = unique('dup');
    const first = {
      request: { uri: 'https://api.example.test/orders', method: 'POST', body: '{"id":1}' },
      meta: { requestId: id, proxyData: { a: 1, b: 2 } },
    };
    expect((await postJson(one!.url, first)).status).toBe(202);
    // The same request, written differently (key order, defaults spelled out, another way to wait).
    const retry = {
      meta: { proxyData: { b: 2, a: 1 }, requestId: id, sync: false },
      request: { body: '{"id":1}', method: 'POST', uri: 'https://api.example.test/orders' },
    };
    expect((await postJson(two!.url, retry)).status).toBe(202);
    const other = { ...first, request: { ...first.request, body: '{"id":2}' } };
    for (const instance of [one!, two!]) {
      const res = await postJson(instance.url, other);
      expect(res.status).toBe(409);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(await res.json()).toMatchObject({
        status: 409,
        code: 'request_id_conflict',
        detail: new RegExp(id),
      });
    }
  });

  it('answers a sync call 202 + Location at once when no sync-gateway runs in the process', async () => {
    const { url } = await startRoles(['ingress'], { syncTimeout: '10m' });
    const res = await postJson(url, { request: { uri: '' }, meta: { requestId: 'lonely', sync: true } });
    expect(res.status).toBe(202);
    expect(res.headers.get('location')).toBe('/requests/lonely');
    expect((await fetch(`${url}/requests/lonely`)).status).toBe(404);
  });
});

/** Plays the executor: every request on `in` gets `answer(envelope)` written to `out`. */
async function playExecutor(
  t: { in: string; out: string },
  answer: (envelope: { meta: { requestId: string } }) => unknown,
) {
  const seen = await reader(t.in);
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const record = await seen.next(60_000).catch(() => undefined);
      if (!record) continue;
      const envelope = JSON.parse(record.value);
      await send(t.out, envelope.meta.requestId, answer(envelope));
    }
  })();
  return async () => {
    stopped = true;
    await seen.close();
    await loop.catch(() => {});
  };
}

describe('sync-gateway', () => {
  it('answers a sync POST with the result envelope from out, status 200 and Retry-After from waitTime', async () => {
    const { url, handles, topics: t } = await startRoles(['ingress', 'sync-gateway'], { syncTimeout: '30s' });
    expect(handles[1]!.url).toBe(url); // one server for both roles
    const result = (id: string) =>
      buildResult({
        requestId: id,
        status: 429,
        body: 'slow down',
        tryCount: 1,
        waitTimeNs: 1_500_000_000,
        proxyData: { a: 1 },
      });
    const stopExecutor = await playExecutor(t, (envelope) => result(envelope.meta.requestId));
    try {
      const res = await postJson(url, {
        request: { uri: 'https://x.test/' },
        meta: { requestId: 's-1', sync: true },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(await res.json()).toEqual(result('s-1'));
    } finally {
      await stopExecutor();
    }
  });

  it('answers 202 + Location when the result misses the budget; the long-poll then returns it', async () => {
    const { url, topics: t } = await startRoles(['ingress', 'sync-gateway'], { syncTimeout: '200ms' });
    const seen = await reader(t.in);
    try {
      const res = await postJson(url, { request: { uri: '' }, meta: { requestId: 'late-1', sync: true } });
      expect(res.status).toBe(202);
      expect(res.headers.get('location')).toBe('/requests/late-1');
      expect(await res.json()).toEqual({ requestId: 'late-1', status: 'pending' });
      expect((await seen.next()).key).toBe('late-1'); // the task was not abandoned

      const pending = await fetch(`${url}/requests/late-1`);
      expect(pending.status).toBe(404);
      expect(await pending.json()).toMatchObject({ requestId: 'late-1', status: 'pending' });

      const poll = fetch(`${url}${res.headers.get('location')}?wait=10s`);
      const result = buildResult({ requestId: 'late-1', status: 200, body: 'done', tryCount: 1 });
      await send(t.out, 'late-1', result);
      const answered = await poll;
      expect(answered.status).toBe(200);
      expect(answered.headers.get('retry-after')).toBeNull();
      expect(await answered.json()).toEqual(result);
    } finally {
      await seen.close();
    }
  });

  it('answers a GET after the fact from the recent results, with only the sync-gateway running', async () => {
    const { url, topics: t } = await startRoles(['sync-gateway']);
    expect((await postJson(url, {})).status).toBe(404); // POST /request belongs to ingress
    const result = buildResult({ requestId: 'past-1', status: 201, body: 'made', tryCount: 1 });
    await send(t.out, 'past-1', result);
    const first = await fetch(`${url}/requests/past-1?wait=10s`);
    expect(first.status).toBe(200);
    const again = await fetch(`${url}/requests/past-1`); // no wait: must come from the cache
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(result);
  });

  it('with SYNC_FOLLOW_OUT=false, answers sync calls from its reply channel alone; other gateways read kept results', async () => {
    const prefix = unique('rp');
    const follow = { syncTimeout: '30s', syncFollowOut: 'false', redisPrefix: prefix };
    const a = await startRoles(['ingress', 'sync-gateway'], follow);
    const b = await startRoles(['sync-gateway'], follow, a.topics);
    const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    const seen = await reader(a.topics.in);
    try {
      const result = buildResult({ requestId: 'ch-1', status: 200, body: 'via channel', tryCount: 1 });
      const call = postJson(a.url, { request: { uri: '' }, meta: { requestId: 'ch-1', sync: true } });
      const record = await seen.next();
      const gateway = record.headers[REPLY_TO_HEADER];
      expect(gateway).toMatch(/^[0-9a-f]{16}$/); // stamped by the service
      // Nothing is written to out: the answer can only come through the gateway's channel.
      await redis.spublish(replyChannel(prefix, gateway!), JSON.stringify(result));
      const answered = await call;
      expect(answered.status).toBe(200);
      expect(await answered.json()).toEqual(result);

      // Gateway b is not the reply-to: its channel never carried ch-1, and it does not follow out.
      expect((await fetch(`${b.url}/requests/ch-1`)).status).toBe(404);
      // A long-poll there finds the result once the executor keeps it in Redis.
      const poll = fetch(`${b.url}/requests/ch-1?wait=20s`);
      await redis.set(resultKey(prefix, 'ch-1'), JSON.stringify(result), 'PX', 60_000);
      const polled = await poll;
      expect(polled.status).toBe(200);
      expect(await polled.json()).toEqual(result);

      // An async request is not stamped: no gateway waits for it.
      expect((await postJson(a.url, { request: { uri: '' }, meta: { requestId: 'as-1' } })).status).toBe(202);
      expect((await seen.next()).headers[REPLY_TO_HEADER]).toBeUndefined();
    } finally {
      await seen.close();
      await redis.del(resultKey(prefix, 'ch-1'));
      redis.disconnect();
    }
  });

  it('on stopAccepting, releases waiting sync calls with 202 + Location and stops listening', async () => {
    const { url, topics: t, stop } = await startRoles(['ingress', 'sync-gateway'], { syncTimeout: '10m' });
    const seen = await reader(t.in);
    try {
      const waiting = postJson(url, { request: { uri: '' }, meta: { requestId: 'shut-1', sync: true } });
      await seen.next(); // written to in: the call now waits on the Hub (for 10 minutes, unless released)
      await stop();
      const res = await waiting;
      expect(res.status).toBe(202);
      expect(res.headers.get('location')).toBe('/requests/shut-1');
      await expect(fetch(`${url}/openapi.json`)).rejects.toThrow();
    } finally {
      await seen.close();
    }
  });
});

describe('idle connections (HTTP_KEEP_ALIVE_TIMEOUT)', () => {
  /** One request on a raw keep-alive connection; resolves once the whole response is in. */
  async function requestOnce(url: string): Promise<Socket> {
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve, reject) => {
      let seen = '';
      socket.on('data', (chunk) => {
        seen += chunk.toString('latin1');
        const head = seen.indexOf('\r\n\r\n');
        const length = Number(/content-length: (\d+)/i.exec(seen)?.[1] ?? -1);
        if (head >= 0 && length >= 0 && seen.length >= head + 4 + length) resolve();
      });
      socket.once('error', reject);
      socket.write(`GET /openapi.json HTTP/1.1\r\nHost: ${hostname}\r\nConnection: keep-alive\r\n\r\n`);
    });
    return socket;
  }
  const closed = (socket: Socket) => new Promise<void>((resolve) => socket.once('close', () => resolve()));

  it("keeps a caller's idle connection past Node's 5 s default, so the caller is the side that closes it", async () => {
    const { url } = await startRoles(['ingress']);
    const socket = await requestOnce(url);
    let open = true;
    void closed(socket).then(() => {
      open = false;
    });
    // A timer can only fire late: open after 6 s means the server's idle timeout is longer than 5 s.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    expect(open).toBe(true);
    socket.destroy();
  }, 30_000);

  it('closes an idle connection once HTTP_KEEP_ALIVE_TIMEOUT has passed', async () => {
    const { url } = await startRoles(['ingress'], { httpKeepAliveTimeout: '1s' });
    const socket = await requestOnce(url);
    await closed(socket);
  }, 30_000);
});
