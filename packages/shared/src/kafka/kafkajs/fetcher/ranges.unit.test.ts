import { describe, expect, it } from 'vitest';
import { BIG_RECORD_BYTES } from '../../batching.ts';
import { MAX_RANGES, meanRecordBytes, READ_AHEAD_BYTES, rangeBytes, rangesOf } from './ranges.ts';

const MAX = 1 << 20;

describe('rangesOf', () => {
  it('asks one range of the whole partition bound while the record size is unknown', () => {
    expect(rangesOf([5n, 9000n], undefined, MAX)).toEqual([{ from: 5n, bytes: MAX }]);
  });

  it('keeps near offsets in one range and splits far ones', () => {
    const perRecord = 1024; // READ_AHEAD_BYTES / 1024 = 256 offsets of gap
    const ranges = rangesOf([10n, 20n, 266n, 10_000n], perRecord, MAX);
    expect(ranges.map((r) => r.from)).toEqual([10n, 10_000n]);
  });

  it('stops at MAX_RANGES; the rest wait for the next round', () => {
    const offsets = Array.from({ length: MAX_RANGES + 3 }, (_, i) => BigInt(i * 1_000_000));
    const ranges = rangesOf(offsets, 1024, MAX);
    expect(ranges).toHaveLength(MAX_RANGES);
    expect(ranges.at(-1)?.from).toBe(offsets[MAX_RANGES - 1]);
  });
});

describe('rangeBytes', () => {
  it('gives small records at least READ_AHEAD_BYTES, at most the partition bound', () => {
    expect(rangeBytes([1n, 2n], 100, MAX)).toBe(READ_AHEAD_BYTES);
    expect(rangeBytes([0n, 1_000_000n], 100, MAX)).toBe(MAX);
  });

  it('gives big records their span and a quarter more, no read-ahead', () => {
    const perRecord = BIG_RECORD_BYTES * 2;
    expect(rangeBytes([7n], perRecord, MAX)).toBe(Math.ceil(perRecord * 1.25));
    expect(rangeBytes([7n, 8n], perRecord, MAX)).toBe(Math.ceil(perRecord * 2 * 1.25));
  });
});

describe('meanRecordBytes', () => {
  it('is undefined for no records, and counts key, value and framing', () => {
    expect(meanRecordBytes([])).toBeUndefined();
    const one = meanRecordBytes([{ key: Buffer.alloc(10), value: Buffer.alloc(100) }]);
    const other = meanRecordBytes([{ key: null, value: Buffer.alloc(210) }]);
    expect(one).toBeGreaterThan(110);
    expect(other! - one!).toBe(100);
  });
});
