import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '../redis/index.ts';
import { uniqueName } from '../testing/index.ts';
import { redisServerAvailable, startRedisCluster, type TestCluster } from '../testing/redis-cluster.ts';
import { Debounces, debouncedResult } from './index.ts';

interface Target {
  name: string;
  open(): Promise<RedisClient>;
  /** Removes what the tests wrote (the shared Redis), or the cluster itself. */
  close(redis: RedisClient, prefix: string): Promise<void>;
}

const single: Target = {
  name: 'a single node',
  open: async () => createRedis({ url: 'redis://127.0.0.1:6379' }),
  close: async (redis, prefix) => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  },
};

// Each key's script touches that key alone (its hash tag: the client's key), so a Redis Cluster
// serves it from the key's slot; the cluster run proves it with keys spread over every node.
let cluster: TestCluster | undefined;
const clustered: Target = {
  name: 'a 3-node Redis Cluster',
  open: async () => {
    cluster = await startRedisCluster(7851);
    return createRedis({ url: cluster.url, cluster: true });
  },
  close: async (redis) => {
    redis.disconnect();
    await cluster?.stop();
  },
};

// The burst's clock is the caller's `now`: these tests pass instants, never wait.
describe.each([single, ...(redisServerAvailable() ? [clustered] : [])])('Debounces on $name', (target) => {
  let redis: RedisClient;
  let debounces: Debounces;
  const prefix = uniqueName('debounce-test');
  beforeAll(async () => {
    redis = await target.open();
    debounces = new Debounces(redis, prefix);
  }, 60_000);
  const t0 = Date.now();
  const seat = (offset: number, arrivedAt = t0 + offset) => ({
    arrivedAt,
    partition: 0,
    offset: String(offset),
  });
  afterAll(() => target.close(redis, prefix), 30_000);

  it('puts each request of a burst off by delay from it, and runs only the latest', async () => {
    const spec = { key: 'profile', delay: '1s' };
    const a = await debounces.enter('billing', 'a', spec, t0, seat(1));
    const b = await debounces.enter('billing', 'b', spec, t0 + 300, seat(2));
    const c = await debounces.enter('billing', 'c', spec, t0 + 600, seat(3));
    expect([a, b, c]).toEqual([
      { dueAt: t0 + 1000, replaced: '' },
      { dueAt: t0 + 1300, replaced: 'a' },
      { dueAt: t0 + 1600, replaced: 'b' },
    ]);
    expect(await debounces.replacedBy('billing', 'a', 'profile')).toBe('c');
    expect(await debounces.replacedBy('billing', 'b', 'profile')).toBe('c');
    expect(await debounces.replacedBy('billing', 'c', 'profile')).toBeUndefined();
    // Asked again (a duplicate lease), the latest still runs and the others still do not.
    expect(await debounces.replacedBy('billing', 'c', 'profile')).toBeUndefined();
    expect(await debounces.replacedBy('billing', 'a', 'profile')).toBe('c');
    // Another client's same key is another key.
    expect(await debounces.replacedBy('other', 'a', 'profile')).toBeUndefined();
  });

  it('ends a burst maxWait after its first request; a later request starts a new one', async () => {
    const spec = { key: 'capped', delay: '1s', maxWait: '1.5s' };
    expect((await debounces.enter(undefined, 'a', spec, t0, seat(1))).dueAt).toBe(t0 + 1000);
    expect((await debounces.enter(undefined, 'b', spec, t0 + 900, seat(2))).dueAt).toBe(t0 + 1500);
    // b is due (maxWait) but not yet run: c starts the next burst, and b is still owed its run.
    const c = await debounces.enter(undefined, 'c', spec, t0 + 1600, seat(3));
    expect(c).toEqual({ dueAt: t0 + 2600, replaced: 'b' });
    expect(await debounces.replacedBy(undefined, 'a', 'capped')).toBe('c');
    expect(await debounces.replacedBy(undefined, 'b', 'capped')).toBeUndefined();
    expect(await debounces.replacedBy(undefined, 'c', 'capped')).toBeUndefined();
  });

  it('starts a new burst after its latest ran', async () => {
    const spec = { key: 'ran', delay: '1s' };
    await debounces.enter(undefined, 'a', spec, t0, seat(1));
    expect(await debounces.replacedBy(undefined, 'a', 'ran')).toBeUndefined();
    expect(await debounces.enter(undefined, 'b', spec, t0 + 200, seat(2))).toEqual({
      dueAt: t0 + 1200,
      replaced: 'a',
    });
    expect(await debounces.replacedBy(undefined, 'b', 'ran')).toBeUndefined();
  });

  it('keeps its decisions when a batch is routed again (replays)', async () => {
    const spec = { key: 'replayed', delay: '1s' };
    await debounces.enter(undefined, 'a', spec, t0, seat(10));
    await debounces.enter(undefined, 'b', spec, t0 + 100, seat(11));
    // The batch again, later: the latest keeps its due time, the earlier one is superseded, due with it.
    expect(await debounces.enter(undefined, 'a', spec, t0 + 500, seat(10))).toEqual({
      dueAt: t0 + 1100,
      replaced: 'b',
    });
    expect(await debounces.enter(undefined, 'b', spec, t0 + 500, seat(11))).toEqual({
      dueAt: t0 + 1100,
      replaced: '',
    });
    expect(await debounces.replacedBy(undefined, 'a', 'replayed')).toBe('b');
    expect(await debounces.replacedBy(undefined, 'b', 'replayed')).toBeUndefined();
  });

  it('tells the later request by its arrival, not by the order routers meet them', async () => {
    const spec = { key: 'arrival', delay: '1s' };
    await debounces.enter(undefined, 'late', spec, t0, { arrivedAt: t0 - 10, partition: 1, offset: '5' });
    // Arrived before it, on another partition of in, routed after it: superseded, due with it.
    expect(
      await debounces.enter(undefined, 'early', spec, t0 + 50, {
        arrivedAt: t0 - 20,
        partition: 2,
        offset: '900',
      }),
    ).toEqual({ dueAt: t0 + 1000, replaced: 'late' });
    expect(await debounces.replacedBy(undefined, 'early', 'arrival')).toBe('late');
    expect(await debounces.replacedBy(undefined, 'late', 'arrival')).toBeUndefined();
  });

  it('keeps bursts of many keys apart, wherever their slots are, braces in a key included', async () => {
    const names = Array.from({ length: 60 }, (_, i) => `many-${i}`).concat([
      'a}b',
      '{x}',
      '}{',
      '{',
      'k{1}2',
    ]);
    const spec = (key: string) => ({ key, delay: '1s' });
    for (const [i, key] of names.entries()) {
      await debounces.enter('billing', `${key}/first`, spec(key), t0, seat(3 * i));
      await debounces.enter('billing', `${key}/last`, spec(key), t0 + 100, seat(3 * i + 1));
    }
    for (const key of names) {
      expect(await debounces.replacedBy('billing', `${key}/first`, key)).toBe(`${key}/last`);
      expect(await debounces.replacedBy('billing', `${key}/last`, key)).toBeUndefined();
    }
  });

  it('runs a task whose key has no state (it lapsed): fail open', async () => {
    expect(await debounces.replacedBy('billing', 'x', 'never-entered')).toBeUndefined();
  });

  it('keeps a key no longer than its burst and the grace', async () => {
    const short = new Debounces(redis, prefix, 1_000);
    await short.enter(undefined, 'a', { key: 'ttl', delay: '2s' }, Date.now());
    const ttl = await redis.pttl(short.key(undefined, 'ttl'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(3_000);
  });

  it('names the replacing request in the debounced result', () => {
    const result = debouncedResult('a', 'c', 'profile', { proxyData: { n: 1 } });
    expect(result.meta.error?.code).toBe('debounced');
    expect(result.meta.debounced).toEqual({ by: 'c' });
    expect(result.meta.proxyData).toEqual({ n: 1 });
    expect(result.response.status).toBe(409);
  });
});
