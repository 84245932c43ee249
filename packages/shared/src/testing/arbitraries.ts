import fc from 'fast-check';
import { MAX_INSTANT_MS } from '../contract/fields.ts';
import { formatDurationNs, MAX_DURATION_NS } from '../time/duration.ts';

/**
 * fast-check arbitraries for the request contract's edge cases, for property tests: each one
 * yields values on both sides of the contract's rules (the tests check what the schema decides,
 * not what the arbitrary meant), biased to the boundaries where arithmetic used to break.
 */

const MS = 1_000_000n;
const HOUR = 3_600_000n * MS;
const DURATION_EDGES = [
  0n,
  1n,
  999_000n,
  MS - 1n,
  MS,
  MS + 1n,
  1_000n * MS,
  2_562_047n * HOUR,
  MAX_DURATION_NS,
];

/**
 * Go duration text for nanoseconds in [minNs, maxNs], in Go's own format (`1h2m3.5s`) or as plain
 * nanoseconds (`1000000ns`), edges included: 0, 1ns, just under and over 1ms, `2562047h`, the int64 max.
 */
export function goDurationText(minNs = 0n, maxNs = MAX_DURATION_NS): fc.Arbitrary<string> {
  const edges = [minNs, maxNs, ...DURATION_EDGES.filter((ns) => ns > minNs && ns < maxNs)];
  const ns = fc.oneof(fc.constantFrom(...edges), fc.bigInt({ min: minNs, max: maxNs }));
  return fc.tuple(ns, fc.boolean()).map(([value, plain]) => (plain ? `${value}ns` : formatDurationNs(value)));
}

/** Epoch ms as RFC 3339 with a UTC offset of `offsetMinutes` (the same instant, local wall time). */
export function rfc3339At(epochMs: number, offsetMinutes: number): string {
  const local = new Date(epochMs + offsetMinutes * 60_000).toISOString();
  if (offsetMinutes === 0) return local;
  const magnitude = Math.abs(offsetMinutes);
  const pad = (n: number) => String(Math.trunc(n)).padStart(2, '0');
  const offset = `${offsetMinutes < 0 ? '-' : '+'}${pad(magnitude / 60)}:${pad(magnitude % 60)}`;
  return local.replace('Z', offset);
}

/** 0000-01-01T00:00:00Z (Date.UTC would read year 0 as 1900). */
const YEAR_0_MS = new Date(0).setUTCFullYear(0, 0, 1);

/**
 * RFC 3339 instants from year 0 to past year 9999, with offsets up to ±23:59: before 1970, the
 * epoch itself, around `nowMs`, and the far end. `pastOnly` keeps them at or before `nowMs`.
 */
export function instantText(nowMs: number, pastOnly = false): fc.Arbitrary<string> {
  const max = pastOnly ? nowMs : MAX_INSTANT_MS + 86_400_000;
  const edges = [YEAR_0_MS, -60_000, -1, 0, nowMs - 1, nowMs, MAX_INSTANT_MS, MAX_INSTANT_MS + 1];
  const epochMs = fc.oneof(
    fc.constantFrom(...edges.filter((ms) => ms <= max)),
    fc.integer({ min: YEAR_0_MS, max }),
    fc.integer({ min: nowMs - 60_000, max: Math.min(max, nowMs + 60_000) }),
  );
  const offset = fc.oneof(
    fc.constant(0),
    fc.constantFrom(1, -1, 23 * 60 + 59, -(23 * 60 + 59)),
    fc.integer({ min: -1439, max: 1439 }),
  );
  return fc.tuple(epochMs, offset).map(([ms, minutes]) => rfc3339At(ms, minutes));
}

/**
 * `meta.deadline` text: instants at least `marginMs` before or after `nowMs` (so that two doors
 * reading the clock a few seconds apart judge them alike), up to the last instant the service
 * holds, and Go durations: short ones (1ms to 50ms, which may pass while the task waits), long
 * ones (an hour and more), and the sub-millisecond edge the contract refuses.
 */
export function deadlineText(nowMs: number, marginMs = 3_600_000): fc.Arbitrary<string> {
  const offset = fc.integer({ min: -1439, max: 1439 });
  const instant = fc.oneof(
    fc.integer({ min: 0, max: nowMs - marginMs }),
    fc.integer({ min: nowMs + marginMs, max: MAX_INSTANT_MS }),
    fc.constantFrom(0, MAX_INSTANT_MS),
  );
  const instants = fc
    .tuple(instant, offset)
    .map(([ms, minutes]) => rfc3339At(ms, minutes))
    // An offset may carry an edge instant's wall time outside 0000-9999: keep the year readable.
    .filter((text) => /^\d{4}-/.test(text));
  const durations = fc.oneof(goDurationText(MS, 50n * MS), goDurationText(HOUR), fc.constant(`${MS - 1n}ns`));
  return fc.oneof(instants, durations);
}
