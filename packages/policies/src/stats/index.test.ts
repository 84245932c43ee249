import { randomBytes } from 'node:crypto';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  bucketOf,
  LATENCY_BUCKETS_MS,
  OriginStatsReader,
  OriginStatsRecorder,
  originStatsIndexKey,
  quantileOf,
} from './index.ts';

const redis: RedisClient = createRedis({ url: 'redis://127.0.0.1:6379', commandTimeoutMs: 2_000 });
const prefix = `t:${randomBytes(6).toString('hex')}:`;
const A = 'http://127.0.0.1:1';
const B = 'https://api.example:443';

afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

describe('origin call statistics', () => {
  it('puts a latency in the first bucket whose bound holds it, and reads quantiles as bucket bounds', () => {
    expect(bucketOf(0)).toBe(0);
    expect(bucketOf(5)).toBe(0);
    expect(bucketOf(5.1)).toBe(1);
    expect(bucketOf(400)).toBe(LATENCY_BUCKETS_MS.indexOf(500));
    expect(bucketOf(1e9)).toBe(LATENCY_BUCKETS_MS.length);
    expect(quantileOf([], 0.5)).toBeNull();
    // 90 calls ≤ 10 ms, 10 calls ≤ 1 s: p50 10 ms, p95 1 s.
    const buckets = new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0);
    buckets[bucketOf(8)] = 90;
    buckets[bucketOf(900)] = 10;
    expect(quantileOf(buckets, 0.5)).toBe(10);
    expect(quantileOf(buckets, 0.9)).toBe(10);
    expect(quantileOf(buckets, 0.95)).toBe(1_000);
  });

  it('sums what several executors flush, per origin, over the window; lists the origins latest first', async () => {
    const now = Date.now();
    const one = new OriginStatsRecorder({ redis, prefix });
    const two = new OriginStatsRecorder({ redis, prefix });
    for (let i = 0; i < 17; i++) one.observe(A, true, 20, now);
    one.observe(A, false, 3_000, now);
    one.observe(A, false, 3_000, now);
    two.observe(A, true, 20, now - 60_000); // the previous minute
    two.observe(B, false, 40_000, now);
    await one.flush();
    await two.stop();

    const reader = new OriginStatsReader(redis, prefix);
    const a = await reader.read(A, 15, now);
    expect(a).toMatchObject({ origin: A, attempts: 20, successes: 18, p50Ms: 25, p95Ms: 5_000 });
    expect(a.successRate).toBeCloseTo(0.9);
    expect(a.lastSeenMs).toBeGreaterThan(0);
    // A window of one minute leaves the previous minute out.
    expect((await reader.read(A, 1, now)).attempts).toBe(19);
    expect(await reader.read('http://never.example:80', 15, now)).toMatchObject({
      attempts: 0,
      successRate: null,
      p50Ms: null,
      lastSeenMs: null,
    });
    expect((await reader.origins()).map((o) => o.origin).sort()).toEqual([A, B].sort());
    // Nothing counted since: a flush writes nothing.
    await one.flush();
    expect((await reader.read(A, 15, now)).attempts).toBe(20);
    // Every minute key expires.
    const keys = (await redis.keys(`${prefix}ostats:{*`)).filter((k) => k !== originStatsIndexKey(prefix));
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) expect(await redis.pttl(key)).toBeGreaterThan(0);
  });

  it('forgets origins not called within two hours when listing', async () => {
    const reader = new OriginStatsReader(redis, prefix);
    await redis.zadd(originStatsIndexKey(prefix), Date.now() - 3 * 3_600_000, 'http://old.example:80');
    expect((await reader.origins()).map((o) => o.origin)).not.toContain('http://old.example:80');
  });
});
