import { describe, expect, it } from 'vitest';
import { settledWithin } from './within.ts';

describe('settledWithin', () => {
  it('tells a fulfilled, a rejected and a pending promise apart', async () => {
    expect(await settledWithin(Promise.resolve(1), 1_000)).toBe('fulfilled');
    expect(await settledWithin(Promise.reject(new Error('no')), 1_000)).toBe('rejected');
    expect(await settledWithin(new Promise(() => {}), 5)).toBe('timeout');
  });
});
