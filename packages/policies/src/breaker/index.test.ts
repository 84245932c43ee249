import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { registry } from '@requester/shared/metrics';
import { createRedis, Redis, type RedisClient } from '@requester/shared/redis';
import { redisServerAvailable, startRedisCluster, type TestCluster } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Admission,
  CircuitBreaker,
  type CircuitBreakerOptions,
  countsAsFailure,
  type JudgedOutcome,
  originOf,
} from './index.ts';
import { callerIdOf as callerId, openIndexKey, originKeys, scopeKeys } from './keys.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const OPEN_MS = 60_000;

/** Breakers on fresh key prefixes (one per test), each on its own connection unless given one. */
function harness(redisUrl = 'redis://127.0.0.1:6379', cluster = false) {
  const connections: RedisClient[] = [];
  const prefixes = new Set<string>();
  const connect = () => {
    const redis = createRedis({ url: redisUrl, cluster, commandTimeoutMs: 2_000 });
    connections.push(redis);
    return redis;
  };
  const admin = connect();
  return {
    admin,
    connect,
    prefix(): string {
      const prefix = `t:${randomBytes(6).toString('hex')}:breaker:`;
      prefixes.add(prefix);
      return prefix;
    },
    breaker(prefix: string, options: Partial<CircuitBreakerOptions> = {}): CircuitBreaker {
      return new CircuitBreaker({
        redis: options.redis ?? connect(),
        prefix,
        failureThreshold: 3,
        openMs: OPEN_MS,
        stateCacheMs: 500,
        ...options,
      });
    },
    /** Makes an open breaker half-open now, without waiting for its open period. */
    async halfOpen(prefix: string, origin: string): Promise<void> {
      // Open until a moment ago, not until the epoch: a held origin's probe grid is anchored on it,
      // and from the epoch its next instant is wherever the 30 s grid of the clock happens to fall.
      await admin.hset(originKeys(prefix, origin)[0], 'u', Date.now() - 1);
    },
    /** Removes every key the tests wrote (a throw-away cluster goes away whole). */
    async close(): Promise<void> {
      if (admin instanceof Redis) {
        for (const prefix of prefixes) {
          const stream = admin.scanStream({ match: `${prefix}*`, count: 1_000 });
          for await (const keys of stream as AsyncIterable<string[]>) {
            if (keys.length > 0) await admin.del(...keys);
          }
        }
      }
      for (const redis of connections) redis.disconnect();
    },
  };
}

/** Admits and reports a failure (or success), as a worker would after the call. */
async function call(breaker: CircuitBreaker, origin: string, success: boolean): Promise<Admission> {
  const admission = await breaker.admit(origin);
  if (admission.admitted) await breaker.record(origin, { ...admission, success });
  return admission;
}

async function trip(breaker: CircuitBreaker, origin: string, threshold = 3): Promise<void> {
  for (let i = 0; i < threshold; i++) expect((await call(breaker, origin, false)).admitted).toBe(true);
}

function granted(admission: Admission): Extract<Admission, { admitted: true }> {
  if (!admission.admitted) throw new Error('expected an admission');
  return admission;
}

function refusal(admission: Admission): { retryAtMs: number; state: string } {
  if (admission.admitted) throw new Error('expected a refusal');
  return admission;
}

describe('circuit breaker', () => {
  const h = harness();
  afterAll(() => h.close());

  it('opens after threshold consecutive failures; a success resets the count', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix);
    const origin = 'https://flaky.example:443';
    await call(breaker, origin, false);
    await call(breaker, origin, false);
    await call(breaker, origin, true);
    expect(await breaker.snapshot(origin)).toMatchObject({ state: 'closed', failures: 0 });
    await call(breaker, origin, false);
    await call(breaker, origin, false);
    expect(await breaker.snapshot(origin)).toMatchObject({ state: 'closed', failures: 2 });
    await call(breaker, origin, false);
    const snapshot = await breaker.snapshot(origin);
    expect(snapshot).toMatchObject({ state: 'open', opens: 1 });
    expect(await breaker.openOrigins()).toEqual([expect.objectContaining({ origin, state: 'open' })]);
  });

  it('refuses while open with retryAtMs = the open-until, from its local cache without Redis', async () => {
    const prefix = h.prefix();
    const redis = h.connect();
    const breaker = h.breaker(prefix, { redis, stateCacheMs: 60_000 });
    const origin = 'https://dead.example:443';
    await trip(breaker, origin);
    const { openUntilMs = 0 } = await breaker.snapshot(origin);
    const refused = refusal(await breaker.admit(origin));
    expect(refused.state).toBe('open');
    // Both instants come from Redis time, converted on the local clock a round trip apart.
    expect(Math.abs(refused.retryAtMs - openUntilMs)).toBeLessThan(1_000);
    expect(refused.retryAtMs - Date.now()).toBeGreaterThan(OPEN_MS / 2);

    redis.disconnect(); // no Redis any more: the open state is still known
    for (let i = 0; i < 100; i++) expect(await breaker.admit(origin)).toEqual(refused);
  });

  it("writes the successes of a proven origin once per stateCacheMs, so they reset others' failures that late at most", async () => {
    const prefix = h.prefix();
    const a = h.breaker(prefix, { stateCacheMs: 60_000 });
    const b = h.breaker(prefix, { stateCacheMs: 60_000 });
    const origin = 'https://mostly-fine.example:443';
    await call(a, origin, true); // a new origin: admitted with a slot, its success proves it
    await call(a, origin, true); // proven: admitted from the cache, its success written once
    await call(b, origin, false);
    expect(await a.snapshot(origin)).toMatchObject({ state: 'closed', failures: 1 });
    // a trusts its state for stateCacheMs: its successes meanwhile write nothing...
    for (let i = 0; i < 5; i++) await call(a, origin, true);
    expect(await a.snapshot(origin)).toMatchObject({ state: 'closed', failures: 1 });
    // ...its failures always do; and once its cached state lapses, a success resets the count again.
    a.clearCache();
    await call(a, origin, true);
    expect(await a.snapshot(origin)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it('is shared by instances on separate connections; other origins are unaffected', async () => {
    const prefix = h.prefix();
    const a = h.breaker(prefix);
    const b = h.breaker(prefix);
    const dead = 'http://dead.example:80';
    const alive = 'http://alive.example:80';
    await call(a, alive, true);
    await trip(a, dead);
    expect(refusal(await b.admit(dead)).state).toBe('open');
    expect(await b.admit(alive)).toEqual({ admitted: true, probe: false });
    expect((await b.admit('http://new.example:80')).admitted).toBe(true);
    expect(await a.snapshot(alive)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it('after openMs lets exactly one of many concurrent callers through as the probe', async () => {
    const prefix = h.prefix();
    const openMs = 150;
    const [a, b] = [h.breaker(prefix, { openMs }), h.breaker(prefix, { openMs })];
    const origin = 'https://dead.example:443';
    await trip(a, origin);
    expect(refusal(await b.admit(origin)).state).toBe('open');
    while ((await a.snapshot(origin)).state === 'open') await sleep(20);
    await sleep(50); // past the open-until on the local clock too (cached refusals end there)

    const admissions = await Promise.all(
      Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? a : b).admit(origin)),
    );
    const probes = admissions.filter((x) => x.admitted);
    expect(probes).toEqual([{ admitted: true, probe: true, ticket: expect.any(String) }]);
    const refused = admissions.filter((x) => !x.admitted).map(refusal);
    expect(new Set(refused.map((x) => x.state))).toEqual(new Set(['half_open']));
    expect((await a.snapshot(origin)).slots).toBe(1);
  });

  it('probe failure re-opens for twice as long (capped); probe success closes', async () => {
    const prefix = h.prefix();
    const openMs = 10_000;
    const breaker = h.breaker(prefix, { openMs, maxOpenMs: 25_000, stateCacheMs: 0 });
    const origin = 'https://sick.example:443';
    await trip(breaker, origin);

    const openFor = async () => ((await breaker.snapshot(origin)).openUntilMs ?? 0) - Date.now();
    for (const [opens, longest] of [
      [2, 2 * openMs],
      [3, 25_000],
    ] as const) {
      await h.halfOpen(prefix, origin);
      const probe = await breaker.admit(origin);
      expect(probe).toMatchObject({ admitted: true, probe: true });
      await breaker.record(origin, { ...(probe as { probe: boolean }), success: false });
      expect(await breaker.snapshot(origin)).toMatchObject({ state: 'open', opens });
      const remaining = await openFor();
      expect(remaining).toBeGreaterThan(longest - 1_000);
      expect(remaining).toBeLessThanOrEqual(longest + 1_000);
    }
    const since = (await breaker.snapshot(origin)).openSinceMs;
    expect(since).toBeDefined();

    await h.halfOpen(prefix, origin);
    const probe = await breaker.admit(origin);
    expect(probe).toMatchObject({ admitted: true, probe: true });
    await breaker.record(origin, { ...(probe as { probe: boolean }), success: true });
    expect(await breaker.snapshot(origin)).toMatchObject({
      state: 'closed',
      failures: 0,
      opens: 0,
      slots: 0,
    });
    expect(await breaker.admit(origin)).toEqual({ admitted: true, probe: false });
    expect(await breaker.openOrigins()).toEqual([]);
  });

  it('gives the probe slot to another caller when the probe never reports (its lease ends)', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { trialLeaseMs: 200, busyRetryMs: 5_000, stateCacheMs: 0 });
    const origin = 'https://dead.example:443';
    await trip(breaker, origin);
    await h.halfOpen(prefix, origin);
    expect(await breaker.admit(origin)).toMatchObject({ admitted: true, probe: true }); // then dies
    const refused = refusal(await breaker.admit(origin));
    expect(refused.state).toBe('half_open');
    // The refused caller is told to come back when the lost probe's slot frees, not after busyRetryMs.
    expect(refused.retryAtMs - Date.now()).toBeLessThan(1_000);
    while (Date.now() < refused.retryAtMs + 50) await sleep(20);
    expect(await breaker.admit(origin)).toMatchObject({ admitted: true, probe: true });
  });

  it('lets at most threshold − failures calls out at once until an origin is proven', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { failureThreshold: 5, busyRetryMs: 300 });
    const origin = 'https://new.example:443';
    const first = await Promise.all(Array.from({ length: 20 }, () => breaker.admit(origin)));
    const admitted = first.filter((x) => x.admitted);
    expect(admitted).toHaveLength(5);
    expect(admitted.every((x) => x.ticket !== undefined && !x.probe)).toBe(true);
    for (const x of first.filter((y) => !y.admitted).map(refusal)) {
      expect(x.state).toBe('closed');
      expect(x.retryAtMs - Date.now()).toBeLessThanOrEqual(300);
    }
    // One failure frees its slot but counts: 4 − 1 others out, 1 failure → no room.
    await breaker.record(origin, { ...(admitted[0] as { probe: boolean }), success: false });
    breaker.clearCache();
    expect((await breaker.admit(origin)).admitted).toBe(false);
    // One success proves the origin: no more limit, no more Redis for admissions.
    await breaker.record(origin, { ...(admitted[1] as { probe: boolean }), success: true });
    const after = await Promise.all(Array.from({ length: 50 }, () => breaker.admit(origin)));
    expect(after.every((x) => x.admitted && x.ticket === undefined)).toBe(true);
  });

  it('ignores late outcomes of calls admitted before the breaker opened', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { stateCacheMs: 0 });
    const origin = 'https://busy.example:443';
    await call(breaker, origin, true); // proven: calls go out freely
    const inFlight = await Promise.all(Array.from({ length: 10 }, () => breaker.admit(origin)));
    expect(inFlight.every((x) => x.admitted)).toBe(true);
    for (const x of inFlight.slice(0, 3))
      await breaker.record(origin, { ...(x as { probe: boolean }), success: false });
    expect(await breaker.snapshot(origin)).toMatchObject({ state: 'open', opens: 1 });
    const stateKey = originKeys(prefix, origin)[0];
    const opened = await h.admin.hgetall(stateKey);
    for (const [i, x] of inFlight.slice(3).entries())
      await breaker.record(origin, { ...(x as { probe: boolean }), success: i % 2 === 0 });
    expect(await h.admin.hgetall(stateKey)).toEqual(opened);
  });

  it('lists open origins for backpressure, repairs its index and caps gauge labels', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { failureThreshold: 1 });
    const origins = Array.from({ length: 25 }, (_, i) => `https://down-${i}.example:443`);
    for (const origin of origins) await trip(breaker, origin, 1);
    await h.halfOpen(prefix, origins[0] ?? '');
    await h.admin.zadd(openIndexKey(prefix), Date.now() + 60_000, 'https://forgotten.example:443');

    const open = await breaker.openOrigins();
    expect(open.map((o) => o.origin).sort()).toEqual([...origins].sort());
    expect(open.find((o) => o.origin === origins[0])?.state).toBe('half_open');
    expect(open.filter((o) => o.state === 'open')).toHaveLength(24);
    expect(await h.admin.zscore(openIndexKey(prefix), 'https://forgotten.example:443')).toBeNull();

    const gauge = await registry.getSingleMetric('requester_breaker_open_seconds')?.get();
    expect(gauge?.values.length).toBe(20);
    // The deprecated name carries the same values for one release.
    const deprecated = await registry.getSingleMetric('requester_breaker_open')?.get();
    expect(deprecated?.values).toEqual(gauge?.values);
    const count = await registry.getSingleMetric('requester_breaker_open_origins')?.get();
    expect(count?.values[0]?.value).toBe(25);
  });

  it('fails open when Redis is unreachable', async () => {
    const redis = h.connect();
    redis.disconnect();
    const breaker = h.breaker(h.prefix(), { redis });
    expect(await breaker.admit('https://any.example:443')).toEqual({ admitted: true, probe: false });
    await expect(
      breaker.record('https://any.example:443', { success: false, probe: false }),
    ).resolves.toEqual({});
  });
});

describe('held origins (a long run of failures, the receiver opting out)', () => {
  const h = harness();
  afterAll(() => h.close());
  const PERIOD_MS = 30_000;

  it('holds an origin after holdFailures failures in a row: one probe per period, refused callers sent to the next probe instant, then recovers', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { holdFailures: 5, holdPeriodMs: PERIOD_MS, stateCacheMs: 0 });
    const origin = 'https://down.example:443';
    const other = 'https://up.example:443';
    await trip(breaker, origin); // 3 failures: open, not held
    expect((await breaker.snapshot(origin)).held).toBeUndefined();
    await h.halfOpen(prefix, origin);
    const probe4 = granted(await breaker.admit(origin));
    expect(probe4).toMatchObject({ admitted: true, probe: true });
    expect(await breaker.record(origin, { ...probe4, success: false })).toEqual({});
    await h.halfOpen(prefix, origin);
    const probe5 = granted(await breaker.admit(origin));
    const began = await breaker.record(origin, { ...probe5, success: false });
    expect(began.held).toBe('failing');
    expect(began.change).toMatchObject({ kind: 'began', reason: 'failing', failures: 5 });
    expect(began.retryAtMs).toBeGreaterThan(Date.now() + PERIOD_MS - 5_000);
    expect(await breaker.snapshot(origin)).toMatchObject({ state: 'open', held: 'failing', runFailures: 5 });
    expect((await breaker.heldOrigins()).map((o) => [o.origin, o.reason, o.failures])).toEqual([
      [origin, 'failing', 5],
    ]);

    // Open: refused as held, until the open-until.
    const refused = await breaker.admit(origin);
    expect(refused).toMatchObject({ admitted: false, held: 'failing', state: 'open' });
    // Half-open: one probe; the others go to the next probe instant, not a busy retry of a second.
    await h.halfOpen(prefix, origin);
    const probe = granted(await breaker.admit(origin));
    expect(probe).toMatchObject({ admitted: true, probe: true, held: 'failing' });
    const waiting = refusal(await breaker.admit(origin));
    expect(waiting).toMatchObject({ held: 'failing' });
    expect(waiting.retryAtMs).toBeGreaterThan(Date.now() + 2_000);
    const stillHeld = await breaker.record(origin, { ...probe, success: false });
    expect(stillHeld).toMatchObject({ held: 'failing' });
    expect(stillHeld.change).toBeUndefined();
    // The failed probe re-opens to the instant the refused callers were sent to.
    expect(Math.abs((stillHeld.retryAtMs ?? 0) - waiting.retryAtMs)).toBeLessThan(50);
    expect((await breaker.snapshot(origin)).runFailures).toBe(6);

    // Another origin is not held.
    expect(await call(breaker, other, true)).toMatchObject({ admitted: true });

    await h.halfOpen(prefix, origin);
    const good = granted(await breaker.admit(origin));
    const ended = await breaker.record(origin, { ...good, success: true });
    expect(ended.held).toBeUndefined();
    expect(ended.change).toMatchObject({ kind: 'ended', reason: 'failing', failures: 6 });
    expect(await breaker.snapshot(origin)).toMatchObject({
      state: 'closed',
      held: undefined,
      runFailures: 0,
    });
    expect(await breaker.heldOrigins()).toEqual([]);
    expect(await breaker.admit(origin)).toEqual({ admitted: true, probe: false });
  });

  it('holds an origin whose run of failures has lasted holdAfterMs; a success ends the run', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { holdAfterMs: 3_600_000, holdPeriodMs: PERIOD_MS, stateCacheMs: 0 });
    const origin = 'https://slow-death.example:443';
    await call(breaker, origin, false);
    await call(breaker, origin, true); // a success ends the run
    expect(await breaker.snapshot(origin)).toMatchObject({ runFailures: 0, failingSinceMs: undefined });
    await call(breaker, origin, false);
    const { failingSinceMs } = await breaker.snapshot(origin);
    expect(failingSinceMs).toBeDefined();
    // The run began an hour ago (written as the script would have an hour back).
    await h.admin.hset(
      originKeys(prefix, origin)[0],
      'fs',
      Number(await h.admin.time().then(([s]) => s)) * 1000 - 3_600_000,
    );
    const admission = granted(await breaker.admit(origin));
    const began = await breaker.record(origin, { ...admission, success: false });
    expect(began.change).toMatchObject({ kind: 'began', reason: 'failing', failures: 2 });
    expect((await breaker.snapshot(origin)).held).toBe('failing');
  });

  it("holds an origin at the receiver's opt-out: no probe, no expiry, until reset", async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { holdPeriodMs: PERIOD_MS, stateCacheMs: 500 });
    const origin = 'https://opted-out.example:443';
    await call(breaker, origin, true); // proven: its successes are not even written...
    const admission = granted(await breaker.admit(origin));
    const began = await breaker.record(origin, { ...admission, success: true, optOut: true }); // ...but an opt-out is
    expect(began.change).toMatchObject({ kind: 'began', reason: 'opt_out', failures: 0 });
    expect(await h.admin.pttl(originKeys(prefix, origin)[0])).toBe(-1);
    breaker.clearCache();
    expect(refusal(await breaker.admit(origin))).toMatchObject({ held: 'opt_out' });
    // Past its open-until nobody probes: the refusal moves it one period on.
    await h.halfOpen(prefix, origin);
    const refused = refusal(await breaker.admit(origin));
    expect(refused).toMatchObject({ held: 'opt_out', state: 'open' });
    expect(refused.retryAtMs).toBeGreaterThan(Date.now() + 2_000);
    expect((await breaker.heldOrigins()).map((o) => o.reason)).toEqual(['opt_out']);
    await breaker.openOrigins();
    const count = await registry.getSingleMetric('requester_origin_failing_origins')?.get();
    expect(count?.values[0]?.value).toBe(1);
    const seconds = await registry.getSingleMetric('requester_origin_failing_seconds')?.get();
    expect(seconds?.values.map((v) => v.labels)).toEqual([{ origin, reason: 'opt_out' }]);

    expect(await breaker.reset(origin)).toBe(true);
    expect(await breaker.heldOrigins()).toEqual([]);
    expect(await breaker.admit(origin)).toMatchObject({ admitted: true });
  });
});

describe('a dead origin under load', () => {
  const h = harness();
  let dead: { url: string; server: Server; healthy: boolean; failed: number; ok: number };
  let alive: { url: string; server: Server; calls: number };

  beforeAll(async () => {
    const listen = async (server: Server) => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    };
    dead = { url: '', healthy: false, failed: 0, ok: 0, server: createServer() };
    dead.server.on('request', (_req, res) => {
      if (dead.healthy) dead.ok++;
      else dead.failed++;
      res.writeHead(dead.healthy ? 200 : 503).end();
    });
    dead.url = await listen(dead.server);
    alive = { url: '', calls: 0, server: createServer() };
    alive.server.on('request', (_req, res) => {
      alive.calls++;
      res.writeHead(200).end();
    });
    alive.url = await listen(alive.server);
  });
  afterAll(async () => {
    await h.close();
    for (const server of [dead.server, alive.server]) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('gets at most threshold + probes calls from 1,000 tasks on 4 workers, then recovers', async () => {
    const prefix = h.prefix();
    const threshold = 5;
    const options = { failureThreshold: threshold, openMs: 100, maxOpenMs: 200, busyRetryMs: 50 };
    const workers = Array.from({ length: 4 }, () => h.breaker(prefix, options));
    const deadOrigin = originOf(dead.url);
    const aliveOrigin = originOf(alive.url);
    await call(workers[0] as CircuitBreaker, aliveOrigin, true); // a partner known to be healthy (no real call)

    // The task pool: ready tasks, and refused ones waiting for their retryAt.
    type Task = { url: string; origin: string };
    const ready: Task[] = [
      ...Array.from({ length: 1_000 }, () => ({ url: dead.url, origin: deadOrigin })),
      ...Array.from({ length: 300 }, () => ({ url: alive.url, origin: aliveOrigin })),
    ].sort(() => Math.random() - 0.5);
    let waiting = 0;
    const done = { dead: 0, alive: 0 };
    let probes = 0;
    let probesInFlight = 0;
    let maxProbesInFlight = 0;
    let aliveRefused = 0;
    const sleepers: Array<() => void> = [];
    const wake = () => {
      for (const resolve of sleepers.splice(0)) resolve();
    };
    const later = (task: Task, atMs: number) => {
      waiting++;
      setTimeout(
        () => {
          waiting--;
          ready.push(task);
          wake();
        },
        Math.max(0, atMs - Date.now()),
      );
    };

    const attempt = async (breaker: CircuitBreaker, task: Task) => {
      const admission = await breaker.admit(task.origin);
      if (!admission.admitted) {
        if (task.origin === aliveOrigin) aliveRefused++;
        return later(task, admission.retryAtMs);
      }
      if (admission.probe) {
        probes++;
        maxProbesInFlight = Math.max(maxProbesInFlight, ++probesInFlight);
      }
      const response = await fetch(task.url);
      await response.arrayBuffer();
      if (admission.probe) probesInFlight--;
      const success = response.status < 500;
      await breaker.record(task.origin, { ...admission, success });
      if (!success) return void ready.push(task); // retried at once: the harshest caller
      if (task.origin === deadOrigin) done.dead++;
      else done.alive++;
    };
    const slot = async (breaker: CircuitBreaker) => {
      while (done.dead + done.alive < 1_300) {
        const task = ready.pop();
        if (task) await attempt(breaker, task);
        else await new Promise<void>((resolve) => sleepers.push(resolve));
      }
      wake();
    };
    // Recovery once three probes have failed: the origin comes back, the next probe closes it.
    const recover = (async () => {
      while (probes < 3 || probesInFlight > 0) await sleep(10);
      expect(dead.failed).toBeLessThanOrEqual(threshold + probes);
      dead.healthy = true;
    })();
    await Promise.all([...workers.flatMap((w) => Array.from({ length: 16 }, () => slot(w))), recover]);

    expect(dead.failed).toBeGreaterThanOrEqual(threshold + 3);
    expect(dead.failed).toBeLessThanOrEqual(threshold + probes);
    expect(maxProbesInFlight).toBe(1);
    expect(done).toEqual({ dead: 1_000, alive: 300 });
    expect(dead.ok).toBe(1_000);
    expect(alive.calls).toBe(300);
    expect(aliveRefused).toBe(0);
    expect(waiting).toBe(0);
    expect(await workers[0]?.snapshot(deadOrigin)).toMatchObject({ state: 'closed', failures: 0 });
  });
});

describe.skipIf(!redisServerAvailable())('circuit breaker on a 3-node Redis Cluster', () => {
  let cluster: TestCluster;
  let h: ReturnType<typeof harness>;
  beforeAll(async () => {
    cluster = await startRedisCluster(7301);
    h = harness(cluster.url, true);
  });
  afterAll(async () => {
    await h?.close();
    await cluster?.stop();
  });

  it('opens, probes, closes and lists origins spread over the slots', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { stateCacheMs: 0 });
    const origins = Array.from({ length: 6 }, (_, i) => `https://c${i}.example:443`);
    for (const origin of origins) await trip(breaker, origin);
    expect((await breaker.openOrigins()).map((o) => o.origin).sort()).toEqual(origins);
    const origin = origins[0] ?? '';
    await h.halfOpen(prefix, origin);
    const probe = granted(await breaker.admit(origin));
    expect(probe).toMatchObject({ admitted: true, probe: true });
    await breaker.record(origin, { ...(probe as { probe: boolean }), success: true });
    expect(await breaker.openOrigins()).toHaveLength(5);
  });
});

describe('whose trouble: a failing caller or a failing origin', () => {
  const h = harness();
  afterAll(() => h.close());

  /** Admits `caller`'s call and reports its outcome, as a worker would. */
  async function callAs(
    breaker: CircuitBreaker,
    origin: string,
    caller: string,
    success: boolean,
    optOut = false,
  ): Promise<Admission> {
    const admission = await breaker.admit(origin, caller);
    if (admission.admitted) await breaker.record(origin, { ...admission, success, optOut });
    return admission;
  }

  it("opens one caller's own breaker on its failures alone; the origin stays free for the others", async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { stateCacheMs: 0 });
    const origin = 'https://partner.example:443';
    expect((await callAs(breaker, origin, 'b', true)).admitted).toBe(true); // proven
    for (let i = 0; i < 5; i++) await callAs(breaker, origin, 'a', false);
    const refused = await breaker.admit(origin, 'a');
    expect(refused).toMatchObject({ admitted: false, state: 'open', scope: 'caller' });
    expect(await breaker.admit(origin, 'b')).toEqual({ admitted: true, probe: false, caller: 'b' });
    expect(await breaker.admit(origin, 'c')).toEqual({ admitted: true, probe: false, caller: 'c' });
    expect(await breaker.snapshot(origin)).toMatchObject({ state: 'closed', failures: 0 });
    expect(await breaker.snapshot(origin, 'a')).toMatchObject({ state: 'open', opens: 1 });
    expect(await breaker.openOrigins()).toEqual([]); // nothing for backpressure to pause on
    expect(await breaker.openCallers()).toEqual([
      expect.objectContaining({ origin, client: 'a', state: 'open' }),
    ]);

    // A's probe finds it back: its breaker closes and leaves no state behind.
    await h.admin.hset(scopeKeys(prefix, origin, callerId('a'))[2] ?? '', 'u', Date.now() - 1);
    const probe = granted(await breaker.admit(origin, 'a'));
    expect(probe).toMatchObject({ callerProbe: true, probe: false });
    await breaker.record(origin, { ...probe, success: true });
    expect(await breaker.snapshot(origin, 'a')).toMatchObject({ state: 'closed', failures: undefined });
    expect(await breaker.admit(origin, 'a')).toEqual({ admitted: true, probe: false, caller: 'a' });
    expect(await breaker.openCallers()).toEqual([]);
  });

  it('opens the origin for every caller when several callers fail (an outage)', async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { stateCacheMs: 0 });
    const origin = 'https://down.example:443';
    await callAs(breaker, origin, 'a', true);
    for (let i = 0; i < 3; i++) {
      await callAs(breaker, origin, 'a', false);
      await callAs(breaker, origin, 'b', false);
    }
    expect(await breaker.snapshot(origin)).toMatchObject({ state: 'open' });
    expect(await breaker.admit(origin, 'c')).toMatchObject({
      admitted: false,
      state: 'open',
      scope: 'origin',
    });
    expect(await breaker.openOrigins()).toEqual([expect.objectContaining({ origin, state: 'open' })]);
  });

  it("a caller cut off by its own breaker adds no failures: another caller's rare failure opens nothing", async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { stateCacheMs: 0 });
    const origin = 'https://busy.example:443';
    for (let i = 0; i < 20; i++) {
      await callAs(breaker, origin, 'a', false);
      if (i % 4 === 0) await callAs(breaker, origin, 'b', i % 8 === 0); // B fails now and then, succeeds more
    }
    expect(await breaker.snapshot(origin)).toMatchObject({ state: 'closed' });
    expect((await breaker.admit(origin, 'b')).admitted).toBe(true);
    expect(await breaker.admit(origin, 'a')).toMatchObject({ admitted: false, scope: 'caller' });
  });

  it("holds only the caller the receiver's opt-out answered, until reset", async () => {
    const prefix = h.prefix();
    const breaker = h.breaker(prefix, { stateCacheMs: 0 });
    const origin = 'https://hooks.example:443';
    const admission = granted(await breaker.admit(origin, 'b'));
    const outcome = await breaker.record(origin, { ...admission, success: true, optOut: true });
    expect(outcome).toMatchObject({
      held: 'opt_out',
      scope: 'caller',
      change: { kind: 'began', scope: 'caller' },
    });
    expect(await breaker.admit(origin, 'b')).toMatchObject({
      admitted: false,
      held: 'opt_out',
      scope: 'caller',
    });
    expect((await breaker.admit(origin, 'a')).admitted).toBe(true);
    // Listed with its client, for the operator; the origin's own gauges do not count it.
    expect(await breaker.heldOrigins()).toEqual([
      expect.objectContaining({ origin, client: 'b', reason: 'opt_out' }),
    ]);
    expect((await breaker.snapshot(origin)).held).toBeUndefined();
    expect(await breaker.reset(origin)).toBe(true);
    expect((await breaker.admit(origin, 'b')).admitted).toBe(true);
    expect(await breaker.heldOrigins()).toEqual([]);
  });
});

describe('origins and failures', () => {
  it('keys a breaker by scheme://host:port, without credentials, path or query', () => {
    expect(originOf('https://user:pw@API.Example.com/a?b=c')).toBe('https://api.example.com:443');
    expect(originOf('https://api.example.com:443/x')).toBe('https://api.example.com:443');
    expect(originOf('http://[::1]:8080/')).toBe('http://[::1]:8080');
    expect(originOf('http://api.example.com/')).toBe('http://api.example.com:80');
  });

  it('counts transport errors, timeouts, 5xx, 429 and 408 as failures, not other answers', () => {
    const response = (status: number): JudgedOutcome => ({ kind: 'response', status });
    const failure = (code: string): JudgedOutcome => ({ kind: 'failure', error: { code } });
    for (const status of [500, 502, 503, 504, 429, 408])
      expect(countsAsFailure(response(status)), `${status}`).toBe(true);
    for (const status of [200, 201, 204, 301, 400, 401, 404, 409, 422])
      expect(countsAsFailure(response(status)), `${status}`).toBe(false);
    for (const code of ['timeout', 'transport_error']) expect(countsAsFailure(failure(code))).toBe(true);
    for (const code of ['target_refused', 'payload_too_large'])
      expect(countsAsFailure(failure(code))).toBe(false);
  });
});
