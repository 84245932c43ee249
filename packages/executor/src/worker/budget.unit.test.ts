import { describe, expect, it } from 'vitest';
import { BORROW_AFTER_MS, BORROW_LEASE, HELD_PER_WORKER, LeaseBudget, WAKE_UPS_HELD } from './budget.ts';

describe('LeaseBudget', () => {
  it('leases one task per free worker while the work is calls', () => {
    const budget = new LeaseBudget(8);
    expect(budget.size()).toBe(8);
    budget.taken(8, 0);
    expect(budget.size()).toBe(0);
    budget.read(8, 8, 0);
    budget.entered(8);
    budget.freed(1_000);
    budget.freed(1_000);
    expect(budget.size()).toBe(2);
  });

  it('frees the workers of wake-ups once read, and leases beyond the workers while they come', () => {
    const budget = new LeaseBudget(4);
    budget.taken(4, 0);
    budget.read(4, 4, 4);
    budget.entered(4);
    expect(budget.working).toBe(0);
    expect(budget.wakeUpsHeld).toBe(4);
    // Half of recent batches were wake-ups: more than the 4 free workers, twice the latest batch at most.
    const size = budget.size();
    expect(size).toBeGreaterThan(4);
    expect(size).toBeLessThanOrEqual(8);
    budget.settled(true);
    expect(budget.wakeUpsHeld).toBe(3);
  });

  it('doubles the leases of a drain of wake-ups up to WAKE_UPS_HELD, then leases for calls alone', () => {
    const budget = new LeaseBudget(2);
    const sizes: number[] = [];
    while (budget.wakeUpsHeld < WAKE_UPS_HELD) {
      const size = budget.size();
      sizes.push(size);
      budget.taken(size, 0);
      budget.read(size, size, size);
      budget.entered(size);
    }
    expect(Math.max(...sizes)).toBeGreaterThan(HELD_PER_WORKER * 2);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(WAKE_UPS_HELD);
    // The wake-ups' budget is used up: what is leased is what calls may take.
    expect(budget.size()).toBeLessThanOrEqual(HELD_PER_WORKER * 2);
  });

  it('counts the calls a lease sized for wake-ups brought beyond the calls bound', () => {
    const budget = new LeaseBudget(1);
    budget.taken(10, 0);
    budget.read(10, 10, 2);
    budget.entered(10);
    // 8 calls held, 4 allowed for one worker.
    expect(budget.callsOver()).toBe(8 - HELD_PER_WORKER);
  });

  it('leaves parked tasks out of the calls held: they take no worker and no lease budget', () => {
    const budget = new LeaseBudget(2);
    budget.taken(2, 0);
    budget.read(2, 2, 0);
    budget.entered(2);
    budget.parked += 2;
    budget.freed(0);
    budget.freed(0);
    expect(budget.size()).toBe(2);
    expect(budget.callsOver()).toBe(0);
  });

  it('borrows only once every worker stayed taken for BORROW_AFTER_MS, then waits as long again', () => {
    const budget = new LeaseBudget(4);
    budget.taken(4, 0);
    budget.read(4, 4, 0);
    budget.entered(4);
    budget.freed(900);
    budget.taken(1, 1_000);
    budget.read(1, 1, 0);
    budget.entered(1);
    expect(budget.size()).toBe(0);
    expect(budget.borrowSize(1_000 + BORROW_AFTER_MS - 1, 0)).toBe(0);
    expect(budget.borrowIn(1_000 + 10, 0)).toBe(BORROW_AFTER_MS - 10);
    expect(budget.borrowSize(1_000 + BORROW_AFTER_MS, 0)).toBe(Math.min(4, BORROW_LEASE));
    budget.borrowed(2_000, false);
    expect(budget.borrowSize(2_000 + 1, 0)).toBe(0);
    // A borrowing lease that found a borrower lets the next go at once.
    budget.borrowed(2_001, true);
    expect(budget.borrowSize(2_002, 0)).toBeGreaterThan(0);
  });

  it('bounds borrowing by twice maxWorkers calls started and by the calls held', () => {
    const budget = new LeaseBudget(2);
    budget.taken(4, 0);
    budget.read(4, 4, 0);
    budget.entered(4);
    // 4 calls started: twice the 2 workers.
    expect(budget.borrowSize(10_000, 0)).toBe(0);
    expect(budget.borrowIn(10_000, 0)).toBe(Number.POSITIVE_INFINITY);
    // Two of them wait in the pool: 2 more may start, and 8 − 4 calls may still be held.
    expect(budget.borrowSize(10_000, 2)).toBe(2);
    budget.taken(4, 0);
    budget.read(4, 4, 0);
    budget.entered(4);
    // 8 calls held: HELD_PER_WORKER × 2.
    expect(budget.borrowSize(10_000, 6)).toBe(0);
  });
});
