import { describe, expect, it } from 'vitest';
import { lagOf } from './loop-lag.ts';

const MS = 1e6; // ns
/** Percentile → interval between the monitor's firings (ns), as IntervalHistogram.percentiles. */
const histogram = (entries: Array<[number, number]>) => new Map(entries.map(([p, ms]) => [p, ms * MS]));

describe('lagOf', () => {
  it('reads an idle loop (every firing on time, 10 ms apart) as no lag', () => {
    expect(lagOf(histogram([[100, 10]]))).toBe(0);
    expect(lagOf(new Map())).toBe(0);
  });

  it('takes short delays as they are: an instant late by d for each', () => {
    expect(
      lagOf(
        histogram([
          [50, 10],
          [100, 14],
        ]),
      ),
    ).toBeCloseTo(2); // half on time, half 4 ms late
  });

  it('weighs a stall by the instants it covered, each late by half of it on average', () => {
    // 90 % on time; 10 % of firings after a 90 ms stall, which covered 9 due instants each.
    // Instants: 90 + 10 × 9 = 180; lag: 10 × 9 × 45 ms / 180 = 22.5 ms (the plain mean: 9 ms).
    expect(
      lagOf(
        histogram([
          [90, 10],
          [100, 100],
        ]),
      ),
    ).toBeCloseTo(22.5);
  });
});
