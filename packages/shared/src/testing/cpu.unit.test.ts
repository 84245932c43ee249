import { describe, expect, it } from 'vitest';
import { median, processCpuSeconds, processTreeCpuSeconds } from './cpu.ts';

describe('benchmark measures', () => {
  it('takes the median of odd and even counts (the mean of the middle two), NaN of none', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });

  it('reads the CPU time of a live process and its children, and nothing of a gone one', () => {
    const own = processCpuSeconds(process.pid);
    expect(own).toBeGreaterThan(0);
    expect(processTreeCpuSeconds(process.pid)).toBeGreaterThanOrEqual(own ?? 0);
    expect(processCpuSeconds(2 ** 22 + 1)).toBeUndefined(); // above Linux's pid_max
  });
});
