import { describe, expect, it } from 'vitest';
import { newTraceparent } from './index.ts';
import { RandomPool } from './random.ts';

/** A fill that numbers every byte it ever hands out (mod 256), so reuse would show. */
function countingFill() {
  let counter = 0;
  const fills: number[] = [];
  const fill = (buffer: Buffer) => {
    fills.push(buffer.length);
    for (let i = 0; i < buffer.length; i++) buffer[i] = counter++ & 0xff;
  };
  return { fill, fills };
}

describe('RandomPool', () => {
  it('hands out each byte once, refilling the whole buffer when too few are left', () => {
    const { fill, fills } = countingFill();
    const pool = new RandomPool(8, fill);
    expect(pool.hex(3)).toBe('000102');
    expect(pool.hex(3)).toBe('030405');
    expect(fills).toEqual([8]);
    // 2 bytes left, 3 wanted: the rest is dropped and the buffer refilled, never re-read.
    expect(pool.hex(3)).toBe('08090a');
    expect(pool.hex(5)).toBe('0b0c0d0e0f');
    expect(fills).toEqual([8, 8]);
  });

  it('skips an all-zero draw', () => {
    const draws = [0, 0, 7];
    const pool = new RandomPool(2, (buffer) => buffer.fill(draws.shift() ?? 1));
    expect(pool.nonZeroHex(2)).toBe('0707');
  });

  it('refuses more bytes than it holds', () => {
    expect(() => new RandomPool(8).hex(9)).toThrow(RangeError);
  });

  it('gives distinct, well-formed ids across many refills of the CSPRNG pool', () => {
    const pool = new RandomPool(64);
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const id = pool.hex(16);
      expect(id).toMatch(/^[0-9a-f]{32}$/);
      seen.add(id);
    }
    expect(seen.size).toBe(10_000);
  });
});

describe('newTraceparent', () => {
  it('gives distinct W3C traceparents with non-zero ids', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5_000; i++) {
      const traceparent = newTraceparent();
      const [, traceId, spanId] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(traceparent) ?? [];
      expect(traceId).toBeDefined();
      expect(traceId).not.toMatch(/^0+$/);
      expect(spanId).not.toMatch(/^0+$/);
      seen.add(traceparent);
    }
    expect(seen.size).toBe(5_000);
  });
});
