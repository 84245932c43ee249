import { monitorEventLoopDelay } from 'node:perf_hooks';

/** The histogram's timer: each sample is the time between two of its ticks, this long when idle. */
const RESOLUTION_MS = 10;
/** The lag reported is that of the last whole window (or of the current one, if higher). */
const WINDOW_MS = 1_000;

let histogram: ReturnType<typeof monitorEventLoopDelay> | undefined;
let windowStart = 0;
let lastWindowMs = 0;
/**
 * The current window's lag, the sample count it was computed at and when: the percentiles change
 * only when the histogram's timer records a sample (every RESOLUTION_MS at most), and a busy
 * executor asks once per batch of answers (every ~20 ms), so each ask would rebuild the percentile
 * map (a native call building ~100 entries and a sort, ~100 µs on a loaded box): rebuilt at most
 * every RECOMPUTE_MS, a tenth of the window the lag is averaged over anyway.
 */
let currentMs = 0;
let currentAtCount = 0;
let currentAtMs = Number.NEGATIVE_INFINITY;
const RECOMPUTE_MS = 100;

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
  const windowEnds = nowMs - windowStart >= WINDOW_MS;
  if (count !== currentAtCount && (windowEnds || nowMs - currentAtMs >= RECOMPUTE_MS)) {
    currentMs = count > 0 ? lagOf(histogram.percentiles) : 0;
    currentAtCount = count;
    currentAtMs = nowMs;
  }
  if (windowEnds) {
    lastWindowMs = currentMs;
    windowStart = nowMs;
    histogram.reset();
    currentMs = 0;
    currentAtCount = 0;
    currentAtMs = Number.NEGATIVE_INFINITY;
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
