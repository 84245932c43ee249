import { settledMemory } from '@requester/shared/testing';
import { describe, expect, it } from 'vitest';
import { ENTRY_OVERHEAD_BYTES, Hub } from './index.ts';

function hub(maxBytes = 1 << 20, ttlMs = 60_000, maxWaiters?: number) {
  let clock = 1_000;
  const h = new Hub<string>({
    maxBytes,
    ttlMs,
    now: () => clock,
    ...(maxWaiters === undefined ? {} : { maxWaiters }),
  });
  return { h, advance: (ms: number) => (clock += ms) };
}

/** A result of `bytes` ASCII characters, decoded from a Buffer as one read from Kafka is. */
const resultOf = (bytes: number, seed: number) => Buffer.alloc(bytes, 97 + (seed % 26)).toString('utf8');

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

  it('keeps results up to maxBytes, evicting the least recently used', () => {
    const cost = (value: string, id: string) => value.length + id.length + ENTRY_OVERHEAD_BYTES;
    const { h } = hub(2 * cost('1', 'a'));
    h.publish('a', '1');
    h.publish('b', '2');
    expect(h.peek('a')).toBe('1'); // a is now more recent than b
    h.publish('c', '3');
    expect(h.size()).toBe(2);
    expect(h.bytes()).toBe(2 * cost('1', 'a'));
    expect(h.peek('b')).toBeUndefined();
    expect(h.peek('a')).toBe('1');
    expect(h.peek('c')).toBe('3');
  });

  it('delivers a result bigger than maxBytes to its waiters, without keeping it', async () => {
    const { h } = hub(1 << 20);
    h.publish('small', 'kept');
    const waiting = h.wait('big', { timeoutMs: 60_000 });
    const big = resultOf(2 << 20, 0);
    h.publish('big', big);
    await expect(waiting).resolves.toBe(big);
    expect(h.peek('big')).toBeUndefined();
    expect(h.peek('small')).toBe('kept');
  });

  it('holds results of 10x its byte bound within the bound, in its accounting and in memory', async () => {
    const maxBytes = 8 << 20;
    const { h } = hub(maxBytes);
    const before = await settledMemory();
    for (let i = 0; i < 80; i++) {
      h.publish(`r-${i}`, resultOf(1 << 20, i));
      expect(h.bytes()).toBeLessThanOrEqual(maxBytes);
    }
    const grown = (await settledMemory()) - before;
    expect(h.size()).toBe(7); // 8 entries would be 8 MiB plus overhead
    expect(grown).toBeLessThan(2 * maxBytes); // 80 MiB went through it (~7 MiB stay)
  });

  it('holds at most maxWaiters callers; past that a wait answers undefined at once', async () => {
    const { h } = hub(1 << 20, 60_000, 2);
    const waits = [h.wait('a', { timeoutMs: 60_000 }), h.wait('b', { timeoutMs: 60_000 })];
    expect(h.crowded()).toBe(true);
    await expect(h.wait('c', { timeoutMs: 60_000 })).resolves.toBeUndefined();
    expect(h.waiting()).toBe(2);
    h.publish('a', 'result-a');
    expect(h.crowded()).toBe(false);
    h.publish('c', 'result-c');
    await expect(h.wait('c', { timeoutMs: 60_000 })).resolves.toBe('result-c'); // kept results still answer
    h.releaseAll();
    await expect(Promise.all(waits)).resolves.toEqual(['result-a', undefined]);
    expect(h.waiting()).toBe(0);
  });

  it('forgets results older than the TTL', () => {
    const { h, advance } = hub(1 << 20, 5_000);
    h.publish('a', '1');
    advance(5_000);
    expect(h.peek('a')).toBe('1');
    advance(1);
    expect(h.peek('a')).toBeUndefined();
  });

  it('drops expired results under steady traffic, not only when they are read', () => {
    const { h, advance } = hub(1 << 20, 5_000);
    for (let i = 0; i < 1_000; i++) h.publish(`old-${i}`, resultOf(100, i));
    expect(h.size()).toBe(1_000);
    advance(5_001);
    // Nobody asks for the old ones: the next results alone must make room.
    for (let i = 0; i < 10; i++) h.publish(`new-${i}`, resultOf(100, i));
    expect(h.size()).toBe(10);
    expect(h.bytes()).toBeLessThan(1_000 * 100);
  });
});
