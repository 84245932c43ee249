import { ValidationError } from '../errors/index.ts';

/**
 * Go `time.Duration` strings (`300ms`, `1.5h`, `2h45m`), parsed exactly as Go's
 * `time.ParseDuration` does, because the wire contract is shared with the original Go service
 * and with producers written in Go.
 *
 * Nanoseconds are a `bigint`: a Go duration is an int64, and its range (±292 years) does not fit
 * a JS number exactly above 2^53 ns (~104 days). Callers that schedule or sleep convert with
 * `toMs` (a plain number, well inside the safe range for any realistic wait).
 */

const NANOSECOND = 1n;
const MICROSECOND = 1_000n * NANOSECOND;
const MILLISECOND = 1_000n * MICROSECOND;
const SECOND = 1_000n * MILLISECOND;
const MINUTE = 60n * SECOND;
const HOUR = 60n * MINUTE;

/** Go's unit table; both micro signs (U+00B5 and U+03BC) are accepted, as in Go. */
const UNIT_NS: ReadonlyMap<string, bigint> = new Map([
  ['ns', NANOSECOND],
  ['us', MICROSECOND],
  ['\u00b5s', MICROSECOND],
  ['\u03bcs', MICROSECOND],
  ['ms', MILLISECOND],
  ['s', SECOND],
  ['m', MINUTE],
  ['h', HOUR],
]);

/** Go's parser works on a uint64 accumulator and rejects anything above 2^63. */
const TWO_POW_63 = 1n << 63n;
export const MAX_DURATION_NS = TWO_POW_63 - 1n;
export const MIN_DURATION_NS = -TWO_POW_63;

/**
 * The grammar of a Go duration as a regular expression (JSON Schema `pattern`). It accepts the
 * same strings as the parser except those that overflow int64, which only the parser can see.
 */
export const GO_DURATION_PATTERN =
  '^[-+]?(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)$';
/** The same grammar without the minus sign, for fields where a negative duration makes no sense. */
export const UNSIGNED_GO_DURATION_PATTERN = GO_DURATION_PATTERN.replace('[-+]?', '\\+?');

/** `message` names the input and, like Go's error, why it was refused. */
export type DurationParse = { ok: true; ns: bigint } | { ok: false; message: string };

const SYNTAX = 'expected [-+]<number><unit>... with units ns, us, ms, s, m, h (e.g. 300ms, 1.5h, 2h45m)';
const OUT_OF_RANGE = 'out of range (a Go duration is at most 2562047h47m16.854775807s)';

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

/** Go's `leadingInt`: consumes [0-9]*, failing on uint64 overflow past 2^63. */
function leadingInt(s: string): { value: bigint; rest: string } | undefined {
  let value = 0n;
  let i = 0;
  for (; i < s.length && isDigit(s[i]); i++) {
    if (value > TWO_POW_63 / 10n) return undefined;
    value = value * 10n + BigInt(s.charCodeAt(i) - 48);
    if (value > TWO_POW_63) return undefined;
  }
  return { value, rest: s.slice(i) };
}

/**
 * Go's `leadingFraction`: consumes [0-9]* after the dot; past 2^63 it stops accumulating
 * precision instead of failing. `scale` is a float64 in Go, and so a number here.
 */
function leadingFraction(s: string): { value: bigint; scale: number; rest: string } {
  let value = 0n;
  let scale = 1;
  let overflow = false;
  let i = 0;
  for (; i < s.length && isDigit(s[i]); i++) {
    if (overflow) continue;
    if (value > MAX_DURATION_NS / 10n) {
      overflow = true;
      continue;
    }
    const next = value * 10n + BigInt(s.charCodeAt(i) - 48);
    if (next > TWO_POW_63) {
      overflow = true;
      continue;
    }
    value = next;
    scale *= 10;
  }
  return { value, scale, rest: s.slice(i) };
}

/** The unit is the longest run of characters that are neither digits nor a dot, as in Go. */
function leadingUnit(s: string): { unit: string; rest: string } {
  let i = 0;
  while (i < s.length && s[i] !== '.' && !isDigit(s[i])) i++;
  return { unit: s.slice(0, i), rest: s.slice(i) };
}

/** Parses one `<number><unit>` segment; returns its nanoseconds (unsigned) or why it failed. */
function parseSegment(s: string): { ns: bigint; rest: string } | { reason: string } {
  if (!(s[0] === '.' || isDigit(s[0]))) return { reason: SYNTAX };
  const int = leadingInt(s);
  if (int === undefined) return { reason: OUT_OF_RANGE };
  const hasIntDigits = int.rest.length !== s.length;
  let rest = int.rest;
  let fraction = { value: 0n, scale: 1 };
  let hasFractionDigits = false;
  if (rest[0] === '.') {
    const parsed = leadingFraction(rest.slice(1));
    hasFractionDigits = parsed.rest.length !== rest.length - 1;
    fraction = parsed;
    rest = parsed.rest;
  }
  if (!hasIntDigits && !hasFractionDigits) return { reason: SYNTAX };
  const { unit, rest: afterUnit } = leadingUnit(rest);
  if (unit === '') return { reason: 'missing unit (ns, us, ms, s, m, h)' };
  const unitNs = UNIT_NS.get(unit);
  if (unitNs === undefined)
    return { reason: `unknown unit ${JSON.stringify(unit)} (use ns, us, ms, s, m, h)` };
  if (int.value > TWO_POW_63 / unitNs) return { reason: OUT_OF_RANGE };
  let ns = int.value * unitNs;
  if (fraction.value > 0n) {
    // Go computes the fractional part in float64 (exact to the nanosecond for up to an hour)
    // and truncates; doing the same keeps results identical to the Go service.
    ns += BigInt(Math.trunc(Number(fraction.value) * (Number(unitNs) / fraction.scale)));
    if (ns > TWO_POW_63) return { reason: OUT_OF_RANGE };
  }
  return { ns, rest: afterUnit };
}

function refused(text: string, reason: string): DurationParse {
  return { ok: false, message: `invalid Go duration ${JSON.stringify(text)}: ${reason}` };
}

/** Parses a Go duration without throwing; accepts and refuses exactly what Go does. */
export function tryParseDuration(text: string): DurationParse {
  let s = text;
  let negative = false;
  if (s[0] === '-' || s[0] === '+') {
    negative = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return { ok: true, ns: 0n };
  if (s === '') return refused(text, SYNTAX);
  let total = 0n;
  while (s !== '') {
    const segment = parseSegment(s);
    if ('reason' in segment) return refused(text, segment.reason);
    total += segment.ns;
    // Go checks the running sum against 2^63 (its uint64 would wrap at 2^64; we never wrap).
    if (total > TWO_POW_63) return refused(text, OUT_OF_RANGE);
    s = segment.rest;
  }
  if (negative) return { ok: true, ns: -total };
  if (total > MAX_DURATION_NS) return refused(text, OUT_OF_RANGE);
  return { ok: true, ns: total };
}

/** Parses a Go duration into nanoseconds; throws a ValidationError saying why it was refused. */
export function parseDuration(text: string): bigint {
  const parsed = tryParseDuration(text);
  if (!parsed.ok) throw new ValidationError([{ path: '', message: parsed.message }]);
  return parsed.ns;
}

/** Whole milliseconds, truncated toward zero like Go's `Duration.Milliseconds()`. */
export function toMs(ns: bigint): number {
  return Number(ns / MILLISECOND);
}

/** Parses a Go duration straight into whole milliseconds (for timers, Redis scores, config). */
export function durationToMs(text: string): number {
  return toMs(parseDuration(text));
}

/**
 * Milliseconds (e.g. a `performance.now()` difference) to integer nanoseconds as a JSON-safe
 * number. Clamped to 2^53 − 1 (~104 days) so a wire value can never lose integer precision.
 */
export function msToNs(ms: number): number {
  if (!Number.isFinite(ms)) throw new RangeError(`not a finite number of milliseconds: ${ms}`);
  const ns = Math.round(ms * 1e6);
  return Math.min(Math.max(ns, -Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);
}

/** Writes `v / 10^precision` as ".123" with trailing zeros dropped (Go's `fmtFrac`). */
function formatFraction(v: bigint, precision: number): { text: string; whole: bigint } {
  let digits = '';
  let printing = false;
  let rest = v;
  for (let i = 0; i < precision; i++) {
    const digit = rest % 10n;
    printing = printing || digit !== 0n;
    if (printing) digits = `${digit}${digits}`;
    rest /= 10n;
  }
  return { text: printing ? `.${digits}` : '', whole: rest };
}

function formatBelowSecond(ns: bigint): string {
  if (ns === 0n) return '0s';
  if (ns < MICROSECOND) return `${ns}ns`;
  const [precision, unit] = ns < MILLISECOND ? [3, '\u00b5s'] : [6, 'ms'];
  const { text, whole } = formatFraction(ns, precision);
  return `${whole}${text}${unit}`;
}

function formatFromSeconds(ns: bigint): string {
  const { text, whole: seconds } = formatFraction(ns, 9);
  const minutes = seconds / 60n;
  const hours = minutes / 60n;
  const secondsPart = `${seconds % 60n}${text}s`;
  if (minutes === 0n) return secondsPart;
  if (hours === 0n) return `${minutes}m${secondsPart}`;
  return `${hours}h${minutes % 60n}m${secondsPart}`;
}

/** Nanoseconds as Go's `Duration.String()` writes them: `1h2m3.5s`, `1.5ms`, `0s`. */
export function formatDurationNs(ns: bigint): string {
  const magnitude = ns < 0n ? -ns : ns;
  const text = magnitude < SECOND ? formatBelowSecond(magnitude) : formatFromSeconds(magnitude);
  return ns < 0n ? `-${text}` : text;
}

/** Milliseconds (rounded to the nanosecond) in Go's duration format, e.g. 1500 → `1.5s`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new RangeError(`not a finite number of milliseconds: ${ms}`);
  return formatDurationNs(BigInt(Math.round(ms * 1e6)));
}
