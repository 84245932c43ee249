import {
  clientScoped,
  type LimiterAlgorithm,
  type LimiterSpec,
  type QuotaSpec,
} from '@requester/shared/contract';
import { ValidationError } from '@requester/shared/errors';
import { durationToMs } from '@requester/shared/time';
import { quotaPeriod } from './calendar.ts';

/** The tag of a calendar quota's key (`quotaKey`). */
export const QUOTA_TAG = 'cq';

/** One window of a limiter, normalized: whole milliseconds. */
export interface LimiterWindow {
  durationMs: number;
  value: number;
}

/** What one take sends to Redis. */
export interface LimiterCall {
  /** The Lua command (commands/<op>-<numKeys>.lua); without windows it only checks the quota. */
  op: string;
  keys: string[];
  args: number[];
}

/**
 * Per algorithm: its Lua command, and the tag in its key names, so that one limiter key used with
 * two algorithms keeps two independent quotas instead of misreading each other's state.
 * The sliding log keeps one log for all windows; the others keep one key per window.
 */
const LAYOUT: Readonly<Record<LimiterAlgorithm, { op: string; tag: string; keyPerWindow: boolean }>> = {
  'token-bucket': { op: 'bucket', tag: 'tb', keyPerWindow: true },
  'leaky-bucket': { op: 'bucket', tag: 'lb', keyPerWindow: true },
  'fixed-window-counter': { op: 'fixedWindow', tag: 'fw', keyPerWindow: true },
  'sliding-window-counter': { op: 'slidingCounter', tag: 'sc', keyPerWindow: true },
  'sliding-window-log': { op: 'slidingLog', tag: 'sl', keyPerWindow: false },
};

const ALGORITHM_OF_TAG: ReadonlyMap<string, LimiterAlgorithm> = new Map(
  (Object.keys(LAYOUT) as LimiterAlgorithm[]).map((algorithm) => [LAYOUT[algorithm].tag, algorithm]),
);

/** The algorithm whose keys carry `tag` (read back from a key name by `limiter show`); undefined: none. */
export function algorithmOfTag(tag: string): LimiterAlgorithm | undefined {
  return ALGORITHM_OF_TAG.get(tag);
}

/**
 * The windows of a spec, one per duration, shortest first. Two windows of one duration would share
 * a key; the smaller value is the binding one for every algorithm, so it alone is kept.
 * Durations are whole milliseconds; one that truncates to 0 ms cannot be a window and is refused.
 */
export function limiterWindows(spec: Pick<LimiterSpec, 'rates'>): LimiterWindow[] {
  const byDuration = new Map<number, number>();
  spec.rates.forEach((rate, i) => {
    const durationMs = durationToMs(rate.duration);
    if (durationMs < 1) {
      throw new ValidationError([
        { path: `meta.limiter.rates[${i}].duration`, message: 'a limiter window must be at least 1ms' },
      ]);
    }
    byDuration.set(durationMs, Math.min(rate.value, byDuration.get(durationMs) ?? rate.value));
  });
  return [...byDuration].sort(([a], [b]) => a - b).map(([durationMs, value]) => ({ durationMs, value }));
}

/**
 * The longest a take of `cost` units (at most the window's value) can be told to wait by one
 * window (README "Algorithms"): a bucket admits one unit every d/v, so `cost` units in cost·d/v;
 * the fixed window and the sliding log may have to wait for the whole window to pass, the sliding
 * counter for what is left of its window plus cost·d/v of the next.
 */
export function longestWaitMs(algorithm: LimiterAlgorithm, window: LimiterWindow, cost = 1): number {
  const { durationMs, value } = window;
  const perTake = Math.ceil((durationMs * cost) / value);
  if (algorithm === 'token-bucket' || algorithm === 'leaky-bucket') return perTake;
  return algorithm === 'sliding-window-counter' ? durationMs + perTake : durationMs;
}

/**
 * The limiter a request's `meta.limiter.key` names: its client's own (the client namespace,
 * docs/architecture.md §10), so a caller can neither spend nor wait on another caller's quota;
 * or, when the operator declared the key shared (SHARED_LIMITER_KEYS: one partner's quota for
 * every caller), the one limiter of that name. A caller cannot make a key shared.
 */
export function limiterKeyOf(client: string | undefined, key: string, shared: ReadonlySet<string>): string {
  return shared.has(key) ? key : clientScoped(client, key);
}

/** The key of a limiter's calendar quota: one count per calendar, so that changing it starts afresh. */
export function quotaKey(prefix: string, key: string, quota: QuotaSpec): string {
  return `${prefix}{lim:${key}}:${QUOTA_TAG}:${quota.period}:${quota.resetDay ?? 1}:${quota.timeZone ?? 'UTC'}`;
}

/**
 * `dispatchMs` > 0 makes a sliding-log take two-phase (commands/slidingLog-n.lua): the call is
 * counted pending until settled with the instant it was sent, at most `dispatchMs` later.
 * Every key of one limiter carries the hash tag `{lim:<key>}`: one Redis Cluster slot, so that
 * a multi-window script is a single-slot operation. Layout: `<prefix>{lim:<key>}:<tag>:<duration ms>`
 * per window, or `<prefix>{lim:<key>}:sl` for the sliding log; then the quota's key (`quotaKey`),
 * whose period is reckoned at `nowMs` (the caller's clock: includes/windows.lua).
 */
export function limiterCall(
  prefix: string,
  spec: LimiterSpec,
  cost: number,
  dispatchMs = 0,
  nowMs = Date.now(),
): LimiterCall {
  const windows = limiterWindows(spec);
  const { op, tag, keyPerWindow } = LAYOUT[spec.algorithm];
  const base = `${prefix}{lim:${spec.key}}:${tag}`;
  const keys =
    windows.length === 0 ? [] : keyPerWindow ? windows.map((w) => `${base}:${w.durationMs}`) : [base];
  let quotaArgs = [0, 0, 0, nowMs];
  if (spec.quota) {
    const period = quotaPeriod(spec.quota, nowMs);
    keys.push(quotaKey(prefix, spec.key, spec.quota));
    quotaArgs = [spec.quota.value, period.startMs, period.endMs, nowMs];
  }
  return {
    op,
    keys,
    args: [cost, dispatchMs, ...quotaArgs, ...windows.flatMap((w) => [w.durationMs, w.value])],
  };
}

/** The Redis keys holding one limiter's state (for tests and admin tools). */
export function limiterKeys(prefix: string, spec: LimiterSpec): string[] {
  return limiterCall(prefix, spec, 1).keys;
}
