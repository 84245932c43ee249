import { registry } from '@requester/shared/metrics';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import {
  eventually,
  redisServerAvailable,
  startRedisCluster,
  startTarget,
  type Target,
  type TestCluster,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResponseCache } from '../cache/index.ts';
import { ExecutorHarness } from '../worker/harness.fixture.ts';
import type { CallOrRefusal } from '../worker/policies.ts';
import { slotsKey } from './cluster.ts';
import {
  ClusterBulkhead,
  type Granted,
  LocalBulkhead,
  MAX_WAIT_MS,
  MIN_WAIT_MS,
  OriginLoad,
  waitForSlotMs,
} from './index.ts';
import { originKeys } from './scripts.ts';

/** Tasks parked in this process for a slot of their full origin. */
async function parkedForSlot(): Promise<number> {
  const metric = await registry.getSingleMetric('requester_executor_parked_tasks')?.get();
  return metric?.values.find((v) => v.labels.reason === 'bulkhead')?.value ?? 0;
}

const until = async (ok: () => Promise<boolean>) => {
  while (!(await ok())) await new Promise((resolve) => setTimeout(resolve, 20));
};

/**
 * Executor one holds an origin's only slot and has 8 tasks parked; executor two parks one task
 * after them. One's calls end one at a time, and each time one's loop asks again at once: first
 * come, one would take every freed slot until its backlog was gone. The order the tasks got a slot.
 */
async function turnOrder(
  redis: RedisClient,
  prefix: string,
  one: ClusterBulkhead,
  two: ClusterBulkhead,
  origin: string,
): Promise<string[]> {
  const waitingKey = originKeys(slotsKey(prefix, origin))[1];
  const held = await one.acquire(origin, undefined, 'A');
  const never = new AbortController().signal;
  const order: string[] = [];
  const waits = new Map<string, Promise<Granted | undefined>>();
  const wait = (bulkhead: ClusterBulkhead, name: string) =>
    waits.set(
      name,
      bulkhead.waitForSlot(origin, undefined, 'A', never, name).then((grant) => {
        order.push(name);
        return grant;
      }),
    );
  for (let i = 0; i < 8; i++) wait(one, `one-${i}`);
  await eventually(async () => (await redis.zcard(waitingKey)) === 1, 5_000, 'one in the line');
  wait(two, 'two');
  await eventually(async () => (await redis.zcard(waitingKey)) === 2, 5_000, 'two in the line');
  let slot = held.granted ? held : undefined;
  for (let served = 0; served < waits.size; served++) {
    slot?.release();
    await eventually(() => order.length > served, 10_000, `grant ${served + 1}`);
    slot = await waits.get(order[served] as string);
  }
  slot?.release();
  return order;
}

describe('waitForSlotMs', () => {
  it('expects a slot after the typical call divided by the calls in flight, bounded, jittered ×0.5–1.5', () => {
    expect(waitForSlotMs(800, 8, 0.5)).toBe(100);
    expect(waitForSlotMs(800, 8, 0)).toBe(50);
    expect(waitForSlotMs(0, 8, 0.5)).toBe(MIN_WAIT_MS); // nothing known yet: come back soon
    expect(waitForSlotMs(30_000, 8, 0.5)).toBe(MAX_WAIT_MS); // a hanging origin: poll, not too often
  });
});

describe('LocalBulkhead', () => {
  it('grants up to the cap per origin; a release frees a slot', async () => {
    const bulkhead = new LocalBulkhead({ maxPerOrigin: 2, maxWaitMs: 0 });
    const a = await bulkhead.acquire('http://a:80');
    const b = await bulkhead.acquire('http://a:80');
    expect([a.granted, b.granted]).toEqual([true, true]);
    // The second took the last slot: the cap binds (the adaptive limit may read its latency).
    expect([a.granted && a.full, b.granted && b.full]).toEqual([false, true]);
    expect((await bulkhead.acquire('http://a:80')).granted).toBe(false);
    expect((await bulkhead.acquire('http://b:80')).granted).toBe(true); // another origin is not affected
    const limited = await bulkhead.acquire('http://c:80', 1); // an adaptive limit below the cap
    expect(limited.granted && limited.full).toBe(true);
    if (a.granted) a.release();
    if (a.granted) a.release(); // a second release is a no-op
    expect(bulkhead.inFlight('http://a:80')).toBe(1);
    expect((await bulkhead.acquire('http://a:80')).granted).toBe(true);
  });

  it('hands the slot a release frees to the call waiting for it, first come first served', async () => {
    const bulkhead = new LocalBulkhead({ maxPerOrigin: 1, maxWaitMs: 60_000 });
    const held = await bulkhead.acquire('http://a:80');
    const order: string[] = [];
    const inLine = (name: string) =>
      bulkhead.acquire('http://a:80').then((grant) => {
        order.push(name);
        return grant;
      });
    const first = inLine('first');
    const second = inLine('second');
    if (held.granted) held.release();
    const grantedFirst = await first;
    expect(grantedFirst.granted).toBe(true);
    expect(bulkhead.inFlight('http://a:80')).toBe(1);
    if (grantedFirst.granted) grantedFirst.release();
    expect((await second).granted).toBe(true);
    expect(order).toEqual(['first', 'second']);
  });

  it('hands a freed slot to the waiting client whose turn comes first (a newcomer before a backlog), first come among equals', async () => {
    // A backlog's client holds the origin's slots and has calls waiting; another client's call
    // comes last: the next slot is its own, then A's waiters again in their order.
    const bulkhead = new LocalBulkhead({ maxPerOrigin: 2, maxWaitMs: 60_000 });
    const held = [
      await bulkhead.acquire('http://a:80', undefined, 'A'),
      await bulkhead.acquire('http://a:80', undefined, 'A'),
    ];
    const order: string[] = [];
    const inLine = (name: string, client: string) =>
      bulkhead.acquire('http://a:80', undefined, client).then((grant) => {
        order.push(name);
        return grant;
      });
    const a1 = inLine('A1', 'A');
    const a2 = inLine('A2', 'A');
    const b1 = inLine('B1', 'B');
    const [first, second] = held;
    if (first?.granted) first.release();
    const toB = await b1;
    expect(order).toEqual(['B1']);
    // B waits no more: the next slot is A's first come.
    if (second?.granted) second.release();
    const toA1 = await a1;
    expect(order).toEqual(['B1', 'A1']);
    for (const grant of [toB, toA1]) if (grant.granted) grant.release();
    const toA2 = await a2;
    expect(order).toEqual(['B1', 'A1', 'A2']);
    if (toA2.granted) toA2.release();
    expect(bulkhead.inFlight('http://a:80')).toBe(0);
  });

  it('hands a freed slot to a parked waiter (waitForSlot): the turn first, then one in its worker, then first come', async () => {
    const bulkhead = new LocalBulkhead({ maxPerOrigin: 2, maxWaitMs: 60_000 });
    const origin = 'http://parked:80';
    const held = [
      await bulkhead.acquire(origin, undefined, 'A'),
      await bulkhead.acquire(origin, undefined, 'A'),
    ];
    const order: string[] = [];
    const parked = (name: string, client: string, signal = new AbortController().signal) =>
      bulkhead.waitForSlot(origin, undefined, client, signal).then((grant) => {
        order.push(name);
        return grant;
      });
    const gone = new AbortController();
    const a1 = parked('A1', 'A');
    const left = parked('A-gone', 'A', gone.signal);
    const a2 = bulkhead.acquire(origin, undefined, 'A').then((grant) => {
      order.push('A2');
      return grant;
    });
    const b1 = parked('B1', 'B');
    gone.abort();
    expect(await left).toBeUndefined();
    const [first, second] = held;
    if (first?.granted) first.release();
    const toB = await b1;
    // B waits no more: A's in its worker goes before A's parked (which would go
    // through the gate again first, the slot idle meanwhile).
    if (second?.granted) second.release();
    const toA2 = await a2;
    toB?.release();
    toB?.release(); // a second release does nothing: A1 gets that slot, and the cap holds
    const toA1 = await a1;
    expect(order).toEqual(['A-gone', 'B1', 'A2', 'A1']);
    expect(bulkhead.inFlight(origin)).toBe(2);
    toA1?.release();
    if (toA2.granted) toA2.release();
    expect(bulkhead.inFlight(origin)).toBe(0);
    // Free: granted at once, whatever the signal.
    const free = await bulkhead.waitForSlot(origin, undefined, 'A', AbortSignal.abort());
    expect(free?.granted).toBe(true);
    free?.release();
  });

  it('waits at most maxWaitMs in the process, then sends the task back for the rest of its wait', async () => {
    // One call in flight for 800 ms already: a slot is expected in 800 ms (random 0.5: no jitter).
    const load = new OriginLoad();
    const startedAt = Date.now();
    load.start('http://slow:80', startedAt - 800);
    const bulkhead = new LocalBulkhead({ maxPerOrigin: 1, maxWaitMs: 30, random: () => 0.5, load });
    const refused = await bulkhead.acquire('http://slow:80');
    if (refused.granted) throw new Error('expected a refusal');
    // The expected wait is read when acquire is called (800 ms, plus however long this machine
    // took to get there), and the 30 ms spent waiting here are taken off it, whatever the timer's
    // own lateness: so it lies within these bounds on a loaded machine too.
    const lateMs = Date.now() - startedAt;
    expect(refused.retryInMs).toBeGreaterThanOrEqual(770 - 1);
    expect(refused.retryInMs).toBeLessThanOrEqual(770 + lateMs + 1);
    expect(bulkhead.inFlight('http://slow:80')).toBe(1);
  });
});

describe('ClusterBulkhead (real Redis)', () => {
  let redis: RedisClient;
  const prefix = `${uniqueName('bh')}:`;
  const made: ClusterBulkhead[] = [];
  const cluster = (leaseMs = 60_000, maxPerOrigin = 2) => {
    const bulkhead = new ClusterBulkhead({ redis, prefix, maxPerOrigin, leaseMs });
    made.push(bulkhead);
    return bulkhead;
  };

  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  });
  afterAll(async () => {
    await Promise.all(made.map((b) => b.close()));
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('shares the cap between executors; a release frees the slot for any of them', async () => {
    const [one, two] = [cluster(), cluster()];
    const origin = `http://${uniqueName('o')}:80`;
    const a = await one.acquire(origin);
    const b = await two.acquire(origin);
    expect([a.granted, b.granted]).toEqual([true, true]);
    expect([a.granted && a.full, b.granted && b.full]).toEqual([false, true]);
    const refused = await one.acquire(origin);
    expect(refused.granted).toBe(false);
    if (a.granted) a.release();
    await redis.ping(); // the release's ZREM went first on the same connection
    expect((await two.acquire(origin)).granted).toBe(true);
  });

  it('a parked waiter gets a slot freed by its own process at once, and one freed by another at its re-check', async () => {
    const [one, two] = [cluster(), cluster()];
    const origin = `http://${uniqueName('o')}:80`;
    const held = [await one.acquire(origin), await two.acquire(origin)];
    const never = new AbortController().signal;
    const own = one.waitForSlot(origin, undefined, 'A', never);
    const [mine, theirs] = held;
    if (mine?.granted) mine.release();
    const first = await own;
    expect(first?.granted).toBe(true);
    const other = one.waitForSlot(origin, undefined, 'B', never);
    if (theirs?.granted) theirs.release();
    const second = await other;
    expect(second?.granted).toBe(true);
    const stopped = new AbortController();
    const gone = two.waitForSlot(origin, undefined, 'C', stopped.signal);
    stopped.abort();
    expect(await gone).toBeUndefined();
    first?.release();
    second?.release();
    await redis.ping();
    expect(await redis.zcard(slotsKey(prefix, origin))).toBe(0);
  });

  it('a freed slot goes to the executor that waited first, not back to the one whose call ended', async () => {
    const [one, two] = [cluster(60_000, 1), cluster(60_000, 1)];
    const order = await turnOrder(redis, prefix, one, two, `http://${uniqueName('o')}:80`);
    // Its turn is second; an executor stalled past the line's stale time (a loaded box) loses its
    // place and joins again at the back, a turn or two later. First come, it is last (ninth).
    expect(order.indexOf('two'), order.join(' ')).toBeLessThanOrEqual(3);
  });

  it('an executor gone from the line between executors (killed) holds a freed slot back only until it is stale', async () => {
    const [one] = [cluster(60_000, 1)];
    const origin = `http://${uniqueName('o')}:80`;
    const [, waiting, seen] = originKeys(slotsKey(prefix, origin));
    const held = await one.acquire(origin, undefined, 'A');
    // An executor that joined the line first and then died: it never asks again.
    await redis.zadd(waiting, 0, 'ghost');
    await redis.zadd(seen, Date.now(), 'ghost');
    const mine = one.waitForSlot(origin, undefined, 'A', new AbortController().signal);
    if (held.granted) held.release();
    const grant = await mine;
    expect(grant?.granted).toBe(true);
    grant?.release();
    expect(await redis.zscore(waiting, 'ghost')).toBeNull();
  });

  it("serves its parked waiters in the line's order, and a new call does not go ahead of them", async () => {
    const bulkhead = new ClusterBulkhead({
      redis,
      prefix,
      maxPerOrigin: 1,
      leaseMs: 60_000,
      weightOf: (client) => (client === 'heavy' ? 3 : 1),
    });
    const origin = `http://${uniqueName('o')}:80`;
    const held = await bulkhead.acquire(origin, undefined, 'light');
    const never = new AbortController().signal;
    const order: string[] = [];
    const parked = ['l1', 'l2', 'h1', 'h2', 'h3', 'h4'].map((name) =>
      bulkhead
        .waitForSlot(origin, undefined, name.startsWith('h') ? 'heavy' : 'light', never)
        .then((grant) => {
          order.push(name);
          return grant;
        }),
    );
    // The line is not empty: a new call is refused without asking Redis for the slot.
    expect((await bulkhead.acquire(origin, undefined, 'light')).granted).toBe(false);
    let slot = held.granted ? held : undefined;
    for (let served = 0; served < parked.length; served++) {
      slot?.release();
      const before = order.length;
      await Promise.race(parked);
      while (order.length === before) await new Promise((resolve) => setTimeout(resolve, 5));
      slot = await parked[['l1', 'l2', 'h1', 'h2', 'h3', 'h4'].indexOf(order.at(-1) ?? '')];
    }
    slot?.release();
    // light had the slot held; heavy (weight 3) then takes three turns for each of light's.
    expect(order).toEqual(['h1', 'h2', 'h3', 'l1', 'h4', 'l2']);
  });

  it('gives the slots of an executor that died (never released) back when their leases end', async () => {
    const origin = `http://${uniqueName('o')}:80`;
    const dead = cluster(300);
    expect((await dead.acquire(origin)).granted).toBe(true);
    expect((await dead.acquire(origin)).granted).toBe(true);
    const alive = cluster(300);
    expect((await alive.acquire(origin)).granted).toBe(false);
    let granted = false;
    while (!granted) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      granted = (await alive.acquire(origin)).granted;
    }
    expect(granted).toBe(true);
  });
});

/**
 * Through the executor over the real Kafka and Redis (see ExecutorHarness), with a target that
 * hangs until the test releases it: no timing thresholds, only what happened before what.
 */
describe('bulkhead in the executor (end to end)', () => {
  const h = new ExecutorHarness();
  let hanging: Target;

  beforeAll(async () => {
    await h.open();
    hanging = await startTarget(); // another port: another origin
  }, 60_000);
  afterAll(async () => {
    await h.close();
    await hanging.close();
  }, 60_000);

  it('40 calls to a hanging origin hold 8 of 32 workers; 200 calls to another origin complete meanwhile', async () => {
    const { queue } = h.startExecutor({
      maxWorkers: 32,
      bulkhead: new LocalBulkhead({ maxPerOrigin: 8 }),
      responseTimeoutMs: 120_000, // the hang ends when the test says so, not by a timeout
    });
    const run = uniqueName('hang');
    const stuck = Array.from({ length: 40 }, (_, i) => ({
      request: { uri: `${hanging.url}/hold/${run}?n=${i}` },
      meta: { requestId: `${run}-stuck-${i}` },
    }));
    await h.submit(queue, stuck);
    await h.until(() => (hanging.holding(run) >= 8 ? true : undefined));

    const healthy = Array.from({ length: 200 }, (_, i) => ({
      request: { uri: `${h.target.url}/echo?run=${run}&n=${i}` },
      meta: { requestId: `${run}-ok-${i}` },
    }));
    await h.submit(queue, healthy);
    const done = await Promise.all(healthy.map((e) => h.resultOf(e.meta.requestId)));
    expect(done.every((r) => r.response.status === 200)).toBe(true);

    // Still hanging, and never more than the cap at it: the 200 did not wait for the hang to end.
    expect(hanging.holding(run)).toBe(8);
    expect(hanging.calls.filter((c) => c.path.includes(run))).toHaveLength(8);
    expect(stuck.some((e) => h.results.has(e.meta.requestId))).toBe(false);

    hanging.release(run);
    const late = await Promise.all(stuck.map((e) => h.resultOf(e.meta.requestId)));
    expect(late.every((r) => r.response.status === 200 && r.meta.tryCount === 1)).toBe(true);
    expect(late.filter((r) => r.meta.waitTime > 0).length).toBeGreaterThanOrEqual(32); // waited for a slot
    expect(hanging.calls.filter((c) => c.path.includes(run))).toHaveLength(40); // each called once
  }, 90_000);

  it('a bulkhead wait is not an attempt: one attempt allowed, three tasks, one slot, all answered', async () => {
    const { queue } = h.startExecutor({ bulkhead: new LocalBulkhead({ maxPerOrigin: 1 }) });
    const run = uniqueName('one');
    // No meta.retry: a budget of one attempt, so a wait counted as one would end in a failure.
    const tasks = [0, 1, 2].map((i) => ({
      request: { uri: `${hanging.url}/hold/${run}?n=${i}` },
      meta: { requestId: `${run}-${i}` },
    }));
    await h.submit(queue, tasks);
    await h.until(() => (hanging.holding(run) === 1 ? true : undefined));
    // The other two have been turned away while the first one hangs: they wait parked.
    await until(async () => (await parkedForSlot()) === 2);
    expect(hanging.holding(run)).toBe(1);

    hanging.release(run);
    const results = await Promise.all(tasks.map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual([
      [200, 1],
      [200, 1],
      [200, 1],
    ]);
    expect(results.filter((r) => r.meta.waitTime > 0).length).toBeGreaterThanOrEqual(2);
    expect(hanging.calls.filter((c) => c.path.includes(run))).toHaveLength(3);
  }, 60_000);

  it('a task refused by a full origin waits parked, holding no worker, and is called once a slot frees: one lease each', async () => {
    const { queue, leased } = h.countingQueue();
    // Two workers: one held by the hanging call; three tasks parked behind it hold none.
    h.startExecutor({ queue, maxWorkers: 2, bulkhead: new LocalBulkhead({ maxPerOrigin: 1 }) });
    const run = uniqueName('park');
    const hold = { request: { uri: `${hanging.url}/hold/${run}` }, meta: { requestId: `${run}-hold` } };
    const refused = [0, 1, 2].map((i) => ({
      request: { uri: `${hanging.url}/echo?run=${run}&n=${i}` },
      meta: { requestId: `${run}-${i}` },
    }));
    await h.submit(queue, [hold]);
    await h.until(() => (hanging.holding(run) === 1 ? true : undefined));
    await h.submit(queue, refused);
    await until(async () => (await parkedForSlot()) === 3);
    // Both workers would be taken if they waited in one: another origin is served meanwhile.
    const other = {
      request: { uri: `${h.target.url}/echo?run=${run}` },
      meta: { requestId: `${run}-other` },
    };
    await h.submit(queue, [other]);
    expect((await h.resultOf(other.meta.requestId)).response.status).toBe(200);
    expect(refused.some((e) => h.results.has(e.meta.requestId))).toBe(false);

    hanging.release(run);
    const results = await Promise.all(refused.map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual(refused.map(() => [200, 1]));
    expect(results.every((r) => r.meta.waitTime > 0)).toBe(true);
    expect([hold, ...refused].map((e) => leased.get(e.meta.requestId))).toEqual([1, 1, 1, 1]);
    expect(hanging.calls.filter((c) => c.path.includes(run))).toHaveLength(4);
    expect(await parkedForSlot()).toBe(0);
  }, 60_000);

  it("gives a freed slot to the parked client whose turn comes first: B's task behind A's backlog goes first", async () => {
    const { queue } = h.startExecutor({ maxWorkers: 8, bulkhead: new LocalBulkhead({ maxPerOrigin: 2 }) });
    const run = uniqueName('fair');
    const task = (client: string, path: string, id: string) => ({
      request: { uri: `${hanging.url}${path}` },
      meta: { requestId: `${run}-${id}`, client },
    });
    // A holds both slots, and has three more tasks parked; B's one comes last.
    await h.submit(queue, [task('A', `/hold/${run}-1`, 'h1'), task('A', `/hold/${run}-2`, 'h2')]);
    await h.until(() => (hanging.holding(`${run}-1`) + hanging.holding(`${run}-2`) === 2 ? true : undefined));
    const backlog = [0, 1, 2].map((i) => task('A', `/echo?run=${run}&a=${i}`, `a${i}`));
    await h.submit(queue, backlog);
    await until(async () => (await parkedForSlot()) === 3);
    const b = task('B', `/echo?run=${run}&b=0`, 'b');
    await h.submit(queue, [b]);
    await until(async () => (await parkedForSlot()) === 4);

    // One of A's calls ends: A has one call left at the origin, B none.
    hanging.release(`${run}-1`);
    await h.resultOf(b.meta.requestId);
    hanging.release(`${run}-2`);
    await Promise.all(backlog.map((e) => h.resultOf(e.meta.requestId)));
    const echoes = hanging.calls.filter((c) => c.path.startsWith(`/echo?run=${run}&`)).map((c) => c.path);
    expect(echoes[0]).toBe(`/echo?run=${run}&b=0`);
    expect(echoes).toHaveLength(4);
  }, 60_000);

  it('a task parked for a slot goes back to the queue when its executor drains; another executor calls it once', async () => {
    const { queue, leased } = h.countingQueue();
    const first = h.startExecutor({ queue, maxWorkers: 2, bulkhead: new LocalBulkhead({ maxPerOrigin: 1 }) });
    const run = uniqueName('drain');
    const hold = { request: { uri: `${hanging.url}/hold/${run}` }, meta: { requestId: `${run}-hold` } };
    const parked = { request: { uri: `${hanging.url}/echo?run=${run}` }, meta: { requestId: `${run}-p` } };
    await h.submit(queue, [hold]);
    await h.until(() => (hanging.holding(run) === 1 ? true : undefined));
    await h.submit(queue, [parked]);
    await until(async () => (await parkedForSlot()) === 1);
    // The drain waits for the hanging call; the parked task does not wait for its slot.
    const stopped = first.stop();
    await until(async () => (await parkedForSlot()) === 0);
    hanging.release(run);
    await stopped;
    expect(h.results.has(parked.meta.requestId)).toBe(false);
    h.startExecutor({ queue, bulkhead: new LocalBulkhead({ maxPerOrigin: 1 }) });
    const result = await h.resultOf(parked.meta.requestId);
    expect([result.response.status, result.meta.tryCount]).toEqual([200, 1]);
    expect(leased.get(parked.meta.requestId)).toBe(2);
    expect(hanging.calls.filter((c) => c.path === `/echo?run=${run}`)).toHaveLength(1);
  }, 60_000);

  it("a cache hit takes no slot: answered while the origin's only slot hangs", async () => {
    const cache = new ResponseCache<CallOrRefusal>({ redis: h.redis, prefix: h.prefix('bh-cache') });
    h.onClose(() => cache.close());
    const { queue } = h.startExecutor({ cache, bulkhead: new LocalBulkhead({ maxPerOrigin: 1 }) });
    const run = uniqueName('cached');
    const cached = (id: string) => ({
      request: { uri: `${hanging.url}/echo?run=${run}` },
      meta: { requestId: `${run}-${id}`, cache: { key: run, ttl: '1m' } },
    });
    await h.submit(queue, [cached('fill')]);
    expect((await h.resultOf(`${run}-fill`)).meta.cached).toBe(false);

    await h.submit(queue, [
      { request: { uri: `${hanging.url}/hold/${run}` }, meta: { requestId: `${run}-hold` } },
    ]);
    await h.until(() => (hanging.holding(run) === 1 ? true : undefined));
    await h.submit(queue, [cached('hit')]);
    const hit = await h.resultOf(`${run}-hit`);
    expect(hit.meta).toMatchObject({ cached: true, waitTime: 0 });
    expect(hanging.holding(run)).toBe(1); // the slot was taken all along
    hanging.release(run);
    await h.resultOf(`${run}-hold`);
  }, 60_000);
});

describe.runIf(redisServerAvailable())('ClusterBulkhead on a Redis Cluster', () => {
  let cluster: TestCluster;
  let redis: RedisClient;
  beforeAll(async () => {
    cluster = await startRedisCluster(7951);
    redis = createRedis({ url: cluster.url, cluster: true });
  }, 60_000);
  afterAll(async () => {
    redis?.disconnect();
    await cluster?.stop();
  }, 30_000);

  it('executors take turns at full origins whose keys live on every master', async () => {
    const prefix = `${uniqueName('bh')}:`;
    const [one, two] = [1, 2].map(
      () => new ClusterBulkhead({ redis, prefix, maxPerOrigin: 1, leaseMs: 60_000 }),
    ) as [ClusterBulkhead, ClusterBulkhead];
    try {
      // Origins in many slots, so on every master.
      for (let o = 0; o < 6; o++) {
        const order = await turnOrder(redis, prefix, one, two, `http://o${o}-${uniqueName('c')}:80`);
        expect(order.indexOf('two'), order.join(' ')).toBeLessThanOrEqual(3);
      }
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  }, 60_000);
});
