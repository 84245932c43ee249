import { describe, expect, it } from 'vitest';
import { batched } from './batch.ts';

describe('batched', () => {
  it('sends the calls of one event-loop turn as one batch, answers in order, and starts a new batch after', async () => {
    const batches: number[][] = [];
    const double = batched(async (items: number[]) => {
      batches.push(items);
      return items.map((n) => n * 2);
    });
    expect(await Promise.all([1, 2, 3].map(double))).toEqual([2, 4, 6]);
    expect(await double(5)).toBe(10);
    expect(batches).toEqual([[1, 2, 3], [5]]);
  });

  it('fails every call of a batch whose run failed', async () => {
    const broken = batched(async (_items: number[]): Promise<number[]> => {
      throw new Error('redis down');
    });
    const settled = await Promise.allSettled([broken(1), broken(2)]);
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected']);
  });
});
