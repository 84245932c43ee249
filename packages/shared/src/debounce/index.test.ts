import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../redis/index.ts';
import { uniqueName } from '../testing/index.ts';
import { Debounces, debouncedResult } from './index.ts';

// The burst's clock is the caller's `now`: these tests pass instants, never wait.
describe('Debounces', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  const prefix = uniqueName('debounce-test');
  const debounces = new Debounces(redis, prefix);
  const t0 = Date.now();
  const seat = (offset: number, arrivedAt = t0 + offset) => ({
    arrivedAt,
    partition: 0,
    offset: String(offset),
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

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
