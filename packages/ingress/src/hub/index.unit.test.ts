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

  describe('offer: results kept unread until someone waits or asks', () => {
    /** Ids `<key> @<client>` as the sync-gateway's; the value names its client. */
    function offering(ttlMs = 60_000) {
      let clock = 1_000;
      const h = new Hub<string>({
        maxBytes: 1 << 20,
        ttlMs,
        now: () => clock,
        keyOf: (id) => id.split(' @')[0] ?? id,
      });
      const reads: string[] = [];
      const idOf = (value: string, key: string) => {
        reads.push(value);
        const client = value.split(':')[0];
        return client === 'bad' ? undefined : `${key} @${client}`;
      };
      return { h, reads, idOf, advance: (ms: number) => (clock += ms) };
    }

    it('reads a result only when it is asked for, and answers it as `publish` would', async () => {
      const { h, reads, idOf } = offering();
      for (let i = 0; i < 100; i++) expect(h.offer(`r-${i}`, `c1:result-${i}`, idOf)).toBe(0);
      expect(reads).toEqual([]);
      expect(h.peek('r-7 @c2')).toBeUndefined();
      expect(reads).toEqual(['c1:result-7']);
      expect(h.peek('r-7 @c1')).toBe('c1:result-7');
      await expect(h.wait('r-8 @c1', { timeoutMs: 0 })).resolves.toBe('c1:result-8');
      expect(reads).toEqual(['c1:result-7', 'c1:result-8']);
    });

    it('reads a result at once for a caller already waiting on its key, and wakes it', async () => {
      const { h, reads, idOf } = offering();
      const waiting = h.wait('r-1 @c1', { timeoutMs: 60_000 });
      expect(h.offer('r-1', 'c2:other client', idOf)).toBe(0);
      expect(h.offer('r-1', 'c1:mine', idOf)).toBe(1);
      await expect(waiting).resolves.toBe('c1:mine');
      expect(reads).toEqual(['c2:other client', 'c1:mine']);
      expect(h.waiting()).toBe(0);
      // Nobody waits on the key any more: the next one is kept unread.
      h.offer('r-1', 'c3:later', idOf);
      expect(reads).toHaveLength(2);
      expect(h.peek('r-1 @c2')).toBe('c2:other client');
    });

    it("keeps two clients' results of one key apart, and the later of two for one id", () => {
      const { h, idOf } = offering();
      h.offer('r-1', 'c1:first', idOf);
      h.offer('r-1', 'c2:theirs', idOf);
      h.offer('r-1', 'c1:second', idOf);
      expect(h.peek('r-1 @c1')).toBe('c1:second');
      expect(h.peek('r-1 @c2')).toBe('c2:theirs');
      h.offer('r-2', 'c1:offered', idOf);
      h.publish('r-2 @c1', 'c1:published later');
      expect(h.peek('r-2 @c1')).toBe('c1:published later');
    });

    it('drops a result whose id cannot be read, and keeps the TTL a result was offered with', () => {
      const { h, idOf, advance } = offering(5_000);
      h.offer('r-1', 'bad:not a result', idOf);
      expect(h.peek('r-1 @bad')).toBeUndefined();
      expect(h.size()).toBe(0);
      h.offer('r-2', 'c1:ages', idOf);
      advance(4_000);
      expect(h.peek('r-2 @c1')).toBe('c1:ages');
      advance(1_001);
      expect(h.peek('r-2 @c1')).toBeUndefined();
    });
  });
});
