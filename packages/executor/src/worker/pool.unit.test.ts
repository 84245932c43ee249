import { describe, expect, it } from 'vitest';
import { WorkerPool } from './pool.ts';

/** A call that ends when its test says so; `started` tells whether the pool has run it yet. */
function gate() {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => {
    end = resolve;
  });
  const call = {
    started: false,
    end,
    fn: () => {
      call.started = true;
      return ended;
    },
  };
  return call;
}

/** Lets the promise callbacks of hand-offs run. */
const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('WorkerPool', () => {
  it('is work-conserving: one client alone takes every worker, and the next call waits', async () => {
    const pool = new WorkerPool(4);
    const calls = Array.from({ length: 5 }, () => gate());
    for (const [i, c] of calls.entries()) void pool.run('a', `p${i}`, c.fn);
    await turn();
    expect(calls.map((c) => c.started)).toEqual([true, true, true, true, false]);
    expect(pool.running).toBe(4);
    calls[0]?.end();
    await turn();
    expect(calls[4]?.started).toBe(true);
    for (const c of calls) c.end();
  });

  it('lets a client below its share borrow a worker at once while another holds them all', async () => {
    const pool = new WorkerPool(4);
    const a = Array.from({ length: 4 }, () => gate());
    for (const c of a) void pool.run('a', 'pa', c.fn);
    expect(pool.mayBorrow('b')).toBe(true);
    const b = gate();
    void pool.run('b', 'pb', b.fn);
    await turn();
    expect(b.started).toBe(true);
    expect(pool.running).toBe(5);
    // a is over its share (2 of 4) now that b is active: it starts nothing more while the pool is full.
    expect(pool.mayBorrow('a')).toBe(false);
    const a5 = gate();
    void pool.run('a', 'pa', a5.fn);
    await turn();
    expect(a5.started).toBe(false);
    for (const c of [...a, b, a5]) c.end();
  });

  it('bounds borrowing by the shares: b borrows up to its share, and never past twice maxWorkers', async () => {
    const pool = new WorkerPool(4);
    const a = Array.from({ length: 4 }, () => gate());
    for (const c of a) void pool.run('a', 'pa', c.fn);
    const b = Array.from({ length: 4 }, () => gate());
    for (const [i, c] of b.entries()) void pool.run('b', `pb${i}`, c.fn);
    await turn();
    // Two clients of weight 1: b's share is 2 of the 4 workers.
    expect(b.map((c) => c.started)).toEqual([true, true, false, false]);
    expect(pool.running).toBe(6);
    // Many newcomers: each below its share borrows one, up to 2 × 4 calls in all.
    const others = Array.from({ length: 6 }, () => gate());
    for (const [i, c] of others.entries()) void pool.run(`c${i}`, 'p', c.fn);
    await turn();
    expect(pool.running).toBe(8);
    expect(others.filter((c) => c.started)).toHaveLength(2);
    expect(pool.mayBorrow('new')).toBe(false);
    for (const c of [...a, ...b, ...others]) c.end();
  });

  it('gives a freed worker to the waiting client with the fewest calls in flight for its weight', async () => {
    const pool = new WorkerPool(2);
    pool.setWeights(new Map([['heavy', 3]]));
    const first = [gate(), gate()];
    void pool.run('light', 'l', (first[0] as ReturnType<typeof gate>).fn);
    void pool.run('heavy', 'h', (first[1] as ReturnType<typeof gate>).fn);
    // Shares of the 2 workers: light 0.5, heavy 1.5; each has one call in flight.
    const light = gate();
    const heavy = gate();
    void pool.run('light', 'l', light.fn);
    void pool.run('heavy', 'h', heavy.fn);
    await turn();
    // heavy is below its share (1 < 1.5): it borrows; light is over (1 ≥ 0.5) and waits.
    expect(heavy.started).toBe(true);
    expect(light.started).toBe(false);
    first[0]?.end();
    first[1]?.end();
    heavy.end();
    await turn();
    expect(light.started).toBe(true);
    light.end();
  });

  it("takes a client's partitions in turns", async () => {
    const pool = new WorkerPool(1);
    const order: string[] = [];
    const blocker = gate();
    void pool.run('a', 'x', blocker.fn);
    const done: Array<Promise<void>> = [];
    for (const p of ['x', 'x', 'x', 'y', 'z']) done.push(pool.run('a', p, async () => void order.push(p)));
    blocker.end();
    await Promise.all(done);
    expect(order).toEqual(['x', 'y', 'z', 'x', 'x']);
  });

  it('forgets a client with nothing in flight: its weight leaves the shares', async () => {
    const pool = new WorkerPool(4);
    const a = gate();
    const running = pool.run('a', 'p', a.fn);
    expect(pool.shareOf('b')).toBe(2);
    a.end();
    await running;
    expect(pool.load('a')).toBe(0);
    expect(pool.shareOf('b')).toBe(4);
  });
});
