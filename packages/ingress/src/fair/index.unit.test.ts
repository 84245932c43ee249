import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../body/index.ts';
import { BodyBudgets, bodyBytesPerKey, KeySlots, waitersPerKey } from './index.ts';

describe('KeySlots', () => {
  it('gives each key at most max slots, others unaffected; a slot is given back once', () => {
    const slots = new KeySlots(2);
    const [a1, a2] = [slots.enter('a'), slots.enter('a')];
    expect(a1 && a2).toBeDefined();
    expect(slots.enter('a')).toBeUndefined();
    expect(slots.enter('b')).toBeDefined();
    a1?.leave();
    a1?.leave();
    expect(slots.held('a')).toBe(1);
    expect(slots.enter('a')).toBeDefined();
    expect(slots.enter('a')).toBeUndefined();
  });

  it('bounds nobody without a key (AUTH=off: only the instance bounds apply)', () => {
    const slots = new KeySlots(1);
    for (let i = 0; i < 5; i++) expect(slots.enter(undefined)).toBeDefined();
  });
});

describe('BodyBudgets', () => {
  it("refuses a key past its share with 429 while other keys still take the instance's bytes", () => {
    const instance = new ByteBudget(1_000);
    const budgets = new BodyBudgets(instance, 300);
    const a = budgets.of('a');
    expect(a.take(300)).toBe(true);
    expect(a.take(1)).toMatchObject({ status: 429, message: expect.stringContaining('PER_KEY') });
    expect(budgets.of('b').take(300)).toBe(true);
    expect(budgets.of('c').take(300)).toBe(true);
    expect(budgets.of('d').take(300)).toMatchObject({ status: 503 });
    // Refused by the instance: the key's share is not kept taken.
    expect(budgets.inUse('d')).toBe(0);
    a.give(300);
    expect(budgets.inUse('a')).toBe(0);
    expect(instance.inUse()).toBe(600);
  });

  it('defaults: an eighth of the instance (never below one body), a tenth of the waiters', () => {
    const bodies = { maxBodyBytes: 1_048_576, maxBodyBytesInFlight: 67_108_864 };
    expect(bodyBytesPerKey(bodies)).toBe(8_388_608);
    expect(bodyBytesPerKey({ ...bodies, maxBodyBytesInFlight: 2_097_152 })).toBe(1_048_576);
    expect(bodyBytesPerKey({ ...bodies, maxBodyBytesInFlightPerKey: 65_536 })).toBe(1_048_576);
    expect(waitersPerKey({ syncMaxWaiters: 10_000 })).toBe(1_000);
    expect(waitersPerKey({ syncMaxWaiters: 5, syncMaxWaitersPerKey: 2 })).toBe(2);
  });
});
