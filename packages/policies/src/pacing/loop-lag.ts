import { monitorEventLoopDelay } from 'node:perf_hooks';

/** The histogram's timer: each sample is the time between two of its ticks, this long when idle. */
const RESOLUTION_MS = 10;
/** The lag reported is that of the last whole window (or of the current one, if higher). */
const WINDOW_MS = 1_000;

let histogram: ReturnType<typeof monitorEventLoopDelay> | undefined;
let windowStart = 0;
let lastWindowMs = 0;
/**
 * The current window's lag and the sample count it was computed at: the percentiles change only
 * when the histogram's timer records a sample (every RESOLUTION_MS at most), and a busy executor
 * asks once per answer, so most asks would rebuild the same percentile map (a native call and a
 * sort, ~2 % of an executor's CPU at 1,000 calls/s).
 */
let currentMs = 0;
let currentAtCount = 0;

/**
 * How late this process's event loop reads an answer, on average over the last second (ms),
 * whatever the target did. The histogram's timer is due every RESOLUTION_MS and records how late
 * it fired; its due instants fall anywhere in the loop's busy spells, as an answer's bytes do. A
 * delay d shorter than the resolution stands for one such instant, late by d; a longer stall (the
 * process descheduled on a loaded machine) was recorded once but covered d / RESOLUTION_MS due
 * instants, late by d / 2 on average: weighted so, from the histogram's percentiles. (The plain
 * mean under-counted stalls: a 1 ms target was throttled by a caller starved at 20 of load; a high
 * percentile over-allowed: a queue of twice a target's capacity went through.)
 */
export function eventLoopLagMs(nowMs = performance.now()): number {
  if (!histogram) {
    histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    histogram.enable();
    windowStart = nowMs;
  }
  const count = histogram.count;
  if (count !== currentAtCount) {
    currentMs = count > 0 ? lagOf(histogram.percentiles) : 0;
    currentAtCount = count;
  }
  if (nowMs - windowStart >= WINDOW_MS) {
    lastWindowMs = currentMs;
    windowStart = nowMs;
    histogram.reset();
    currentMs = 0;
    currentAtCount = 0;
    return lastWindowMs;
  }
  return Math.max(lastWindowMs, currentMs);
}

/**
 * The mean lag of an instant, from the histogram's percentiles (percentile → interval between two
 * firings, ns): each step of the distribution weighs its share of the samples.
 */
export function lagOf(percentiles: ReadonlyMap<number, number>): number {
  let lagged = 0;
  let instants = 0;
  let below = 0;
  for (const [percentile, ns] of [...percentiles].sort(([a], [b]) => a - b)) {
    const share = percentile - below;
    below = percentile;
    const d = Math.max(0, ns / 1e6 - RESOLUTION_MS);
    const covered = Math.max(1, d / RESOLUTION_MS);
    lagged += share * covered * (d < RESOLUTION_MS ? d : d / 2);
    instants += share * covered;
  }
  return instants > 0 ? lagged / instants : 0;
}
