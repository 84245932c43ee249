import { randomBytes } from 'node:crypto';
import type { LimiterSpec, QuotaSpec } from '@requester/shared/contract';
import { createRedis, type Redis } from '@requester/shared/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectLimiter, limiterKeys, RateLimiter } from './index.ts';

const prefix = `t:${randomBytes(6).toString('hex')}:`;
const unique = () => `quota-${randomBytes(5).toString('hex')}`;

/** A clock the test moves: the quota's period is reckoned by it, never by Redis TIME. */
function testClock(iso: string) {
  let nowMs = Date.parse(iso);
  return {
    now: () => nowMs,
    set: (to: string) => {
      nowMs = Date.parse(to);
    },
  };
}

function quotaSpec(quota: QuotaSpec, rates: LimiterSpec['rates'] = [], key = unique()): LimiterSpec {
  return { key, algorithm: 'fixed-window-counter', rates, quota };
}

describe('calendar quota', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' }) as Redis;
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('counts cost units in the month and starts afresh on the reset day, a short month on its last day', async () => {
    const clock = testClock('2027-02-27T23:59:59.000Z');
    const limiter = new RateLimiter({ redis, prefix, clock: clock.now });
    const spec = quotaSpec({ value: 10, period: 'month', resetDay: 31 });
    expect((await limiter.take(spec, 4)).allowed).toBe(true);
    expect((await limiter.take(spec, 4)).allowed).toBe(true);
    const denied = await limiter.take(spec, 3);
    expect(denied.outcome).toBe('limited');
    expect(denied.remaining).toBe(2);
    // February has no 31st: its period ends on the 28th at midnight UTC, one second away.
    expect(denied.retryAfterMs).toBe(1_000);
    expect((await limiter.take(spec, 2)).allowed).toBe(true);
    expect((await limiter.take(spec, 1)).allowed).toBe(false);

    clock.set('2027-02-28T00:00:00.000Z');
    const fresh = await limiter.take(spec, 10);
    expect(fresh.allowed).toBe(true);
    expect(fresh.remaining).toBe(0);
    const next = await limiter.take(spec, 1);
    expect(next.allowed).toBe(false);
    // March has a 31st: the next reset.
    expect(next.retryAfterMs).toBe(Date.parse('2027-03-31T00:00:00Z') - Date.parse('2027-02-28T00:00:00Z'));
  });

  it('resets at midnight of the reset day in the quota’s time zone', async () => {
    const clock = testClock('2027-03-14T22:59:59.999Z'); // 23:59:59.999 in Paris (UTC+1)
    const limiter = new RateLimiter({ redis, prefix, clock: clock.now });
    const spec = quotaSpec({ value: 1, period: 'month', resetDay: 15, timeZone: 'Europe/Paris' });
    expect((await limiter.take(spec)).allowed).toBe(true);
    const denied = await limiter.take(spec);
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBe(1);
    clock.set('2027-03-14T23:00:00.000Z');
    expect((await limiter.take(spec)).allowed).toBe(true);
  });

  it('keeps counting a period another process already began with a clock ahead', async () => {
    const ahead = testClock('2027-01-01T00:00:00.100Z');
    const behind = testClock('2026-12-31T23:59:59.950Z');
    const spec = quotaSpec({ value: 2, period: 'day' });
    const first = new RateLimiter({ redis, prefix, clock: ahead.now });
    const late = new RateLimiter({ redis, prefix, clock: behind.now });
    expect((await first.take(spec, 2)).allowed).toBe(true);
    // The late process is still on 31 December, yet the new day's count binds it.
    const denied = await late.take(spec);
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBe(
      Date.parse('2027-01-02T00:00:00Z') - Date.parse('2026-12-31T23:59:59.950Z'),
    );
  });

  it('is checked and consumed with the windows: a denial on either side spends nothing', async () => {
    const clock = testClock('2027-06-10T12:00:00.000Z');
    const limiter = new RateLimiter({ redis, prefix, clock: clock.now });
    const spec = quotaSpec({ value: 3, period: 'week' }, [{ duration: '1h', value: 2 }]);
    expect((await limiter.take(spec, 2)).allowed).toBe(true);
    // The window (2 an hour) denies: the quota keeps its 1 unit.
    expect((await limiter.take(spec, 1)).allowed).toBe(false);
    const [quotaKey] = limiterKeys(prefix, spec).slice(-1);
    expect(await redis.get(quotaKey!)).toMatch(/:2$/);
    const states = await inspectLimiter(redis, prefix, spec.key, [], 3);
    const quota = states.find((s) => s.algorithm === 'calendar-quota');
    expect(quota).toMatchObject({ used: 2, value: 3, remaining: 1 });
    // Monday 14 June 2027, 00:00 UTC: the ISO week's end.
    expect(quota?.resetAtMs).toBe(Date.parse('2027-06-14T00:00:00Z'));
  });

  it('says oversized for a cost above the quota, whatever the wait', async () => {
    const limiter = new RateLimiter({ redis, prefix });
    const decision = await limiter.take(quotaSpec({ value: 5, period: 'day' }), 6);
    expect(decision.outcome).toBe('oversized');
  });

  it('keeps the quota in the limiter’s slot, after its windows', () => {
    const spec = quotaSpec({ value: 5, period: 'month', resetDay: 3, timeZone: 'Asia/Tokyo' }, [
      { duration: '1s', value: 2 },
      { duration: '1m', value: 20 },
    ]);
    const keys = limiterKeys('rq:', { ...spec, key: 'partner' });
    expect(keys).toEqual([
      'rq:{lim:partner}:fw:1000',
      'rq:{lim:partner}:fw:60000',
      'rq:{lim:partner}:cq:month:3:Asia/Tokyo',
    ]);
  });
});
