import { describe, expect, it } from 'vitest';
import { Hub } from './index.ts';

function hub(maxEntries = 10, ttlMs = 60_000) {
  let clock = 1_000;
  const h = new Hub<string>({ maxEntries, ttlMs, now: () => clock });
  return { h, advance: (ms: number) => (clock += ms) };
}

describe('Hub', () => {
  it('wakes a waiter registered before the result arrives, and every waiter of that id', async () => {
    const { h } = hub();
    const first = h.wait('a', { timeoutMs: 60_000 });
    const second = h.wait('a', { timeoutMs: 60_000 });
    expect(h.waiting()).toBe(2);
    h.publish('b', 'other');
    h.publish('a', 'result-a');
    await expect(first).resolves.toBe('result-a');
    await expect(second).resolves.toBe('result-a');
    expect(h.waiting()).toBe(0);
  });

  it('answers a result that already passed from the recent cache', async () => {
    const { h } = hub();
    h.publish('a', 'result-a');
    await expect(h.wait('a', { timeoutMs: 0 })).resolves.toBe('result-a');
    expect(h.peek('a')).toBe('result-a');
  });

  it('gives up after the timeout, and on abort, and forgets the waiter', async () => {
    const { h } = hub();
    await expect(h.wait('a', { timeoutMs: 1 })).resolves.toBeUndefined();
    const controller = new AbortController();
    const aborted = h.wait('a', { timeoutMs: 60_000, signal: controller.signal });
    controller.abort();
    await expect(aborted).resolves.toBeUndefined();
    expect(h.waiting()).toBe(0);
  });

  it('releases every waiter empty-handed on releaseAll', async () => {
    const { h } = hub();
    const waits = [h.wait('a', { timeoutMs: 60_000 }), h.wait('b', { timeoutMs: 60_000 })];
    h.releaseAll();
    await expect(Promise.all(waits)).resolves.toEqual([undefined, undefined]);
  });

  it('keeps at most maxEntries results, evicting the least recently used', () => {
    const { h } = hub(2);
    h.publish('a', '1');
    h.publish('b', '2');
    expect(h.peek('a')).toBe('1'); // a is now more recent than b
    h.publish('c', '3');
    expect(h.size()).toBe(2);
    expect(h.peek('b')).toBeUndefined();
    expect(h.peek('a')).toBe('1');
    expect(h.peek('c')).toBe('3');
  });

  it('forgets results older than the TTL', () => {
    const { h, advance } = hub(10, 5_000);
    h.publish('a', '1');
    advance(4_999);
    expect(h.peek('a')).toBe('1');
    advance(1);
    expect(h.peek('a')).toBeUndefined();
    h.publish('b', '2');
    advance(5_000);
    h.publish('c', '3'); // publishing sweeps expired entries from the old end
    expect(h.size()).toBe(1);
  });
});
