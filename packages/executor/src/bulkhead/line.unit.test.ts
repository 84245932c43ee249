import { describe, expect, it } from 'vitest';
import { type Granted, LocalBulkhead } from './local.ts';

const ORIGIN = 'http://saturated:80';

/**
 * An origin of one slot, held, and `waiters` parked for it in this order; then each slot handed over
 * is released at once: the order in which the waiters were served.
 */
async function served(
  waiters: Array<{ name: string; client: string; partition?: string }>,
  weightOf?: (client: string) => number,
): Promise<string[]> {
  const bulkhead = new LocalBulkhead({ maxPerOrigin: 1, maxWaitMs: 0, ...(weightOf ? { weightOf } : {}) });
  const held = await bulkhead.acquire(ORIGIN);
  const order: string[] = [];
  const signal = new AbortController().signal;
  const all = waiters.map(({ name, client, partition }) =>
    bulkhead.waitForSlot(ORIGIN, undefined, client, signal, partition).then((grant?: Granted) => {
      order.push(name);
      // Released in a later turn of the loop, once every waiter has joined.
      queueMicrotask(() => grant?.release());
    }),
  );
  if (held.granted) held.release();
  await Promise.all(all);
  return order;
}

describe('SlotLine: one order at a saturated origin', () => {
  it('shares the slots between two backlogged clients by weight (3 : 1)', async () => {
    const waiters = Array.from({ length: 40 }, (_, i) => [
      { name: `H${i}`, client: 'heavy' },
      { name: `L${i}`, client: 'light' },
    ]).flat();
    const order = await served(waiters, (client) => (client === 'heavy' ? 3 : 1));
    const first = order.slice(0, 40);
    expect(first.filter((n) => n.startsWith('H'))).toHaveLength(30);
    // Every window of 4 holds one of light's: the shares hold all along, not only on average.
    for (let i = 0; i + 4 <= 40; i += 4)
      expect(first.slice(i, i + 4).filter((n) => n.startsWith('L'))).toHaveLength(1);
  });

  it("serves a cold partition's task before most of a hot partition's backlog leased ahead of it", async () => {
    const hot = Array.from({ length: 30 }, (_, i) => ({ name: `hot${i}`, client: 'A', partition: 'hot' }));
    const cold = Array.from({ length: 5 }, (_, i) => ({ name: `cold${i}`, client: 'A', partition: `c${i}` }));
    const order = await served([...hot, ...cold]);
    // The partitions take turns: each cold one before the hot partition's second task.
    const lastCold = Math.max(...cold.map((c) => order.indexOf(c.name)));
    expect(lastCold).toBeLessThanOrEqual(cold.length);
    // Inside a partition, its tasks keep their order.
    expect(order.filter((n) => n.startsWith('hot'))).toEqual(hot.map((h) => h.name));
  });

  it("serves a second client's few tasks next, before the first client's backlog", async () => {
    const backlog = Array.from({ length: 30 }, (_, i) => ({ name: `A${i}`, client: 'A' }));
    const few = Array.from({ length: 3 }, (_, i) => ({ name: `B${i}`, client: 'B' }));
    const order = await served([...backlog, ...few]);
    // Equal weights: B's three alternate with A's from the first slot on.
    for (const b of few) expect(order.indexOf(b.name)).toBeLessThanOrEqual(6);
  });

  it('a client that had no call nor waiter at the origin banks no credit: it comes back level', async () => {
    const bulkhead = new LocalBulkhead({ maxPerOrigin: 1, maxWaitMs: 0 });
    // B was served alone for a long while; then A, idle so far, joins: they alternate.
    for (let i = 0; i < 20; i++) {
      const grant = await bulkhead.acquire(ORIGIN, undefined, 'B');
      if (grant.granted) grant.release();
    }
    const order = await new Promise<string[]>((resolve) => {
      void (async () => {
        const held = await bulkhead.acquire(ORIGIN, undefined, 'B');
        const got: string[] = [];
        const signal = new AbortController().signal;
        const waits = ['A0', 'B0', 'A1', 'B1'].map((name) =>
          bulkhead.waitForSlot(ORIGIN, undefined, name[0], signal).then((grant) => {
            got.push(name);
            queueMicrotask(() => grant?.release());
          }),
        );
        if (held.granted) held.release();
        await Promise.all(waits);
        resolve(got);
      })();
    });
    expect(order).toEqual(['A0', 'B0', 'A1', 'B1']);
  });
});
