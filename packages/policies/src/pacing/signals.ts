/**
 * What a target's answer says about its pace (docs/architecture.md §9 "Origin pacing"), read from
 * the status and the headers, as a pure function (signals.unit.test.ts):
 * - `429`, or `503` with `Retry-After`: slow down (`slow`); `Retry-After` says how long to hold
 *   the whole origin.
 * - The IETF httpapi draft's `RateLimit-Policy` (`50;w=1`, or `"p";q=50;w=1`) and `RateLimit`
 *   (`limit=50, remaining=0, reset=1`, or `"p";r=0;t=1`), and the common
 *   `X-RateLimit-Limit/Remaining/Reset`: the quota becomes a pace ceiling (calls per second), and
 *   a quota used up (`remaining` 0) holds the origin until its reset.
 * - Timeouts, transport errors and a 5xx without `Retry-After`: the target is overloaded or down
 *   (`overload`): the adaptive concurrency shrinks; the breaker counts them.
 * Every signal is bounded: a hold never longer than RETRY_AFTER_MAX, a quota window of 1 ms–1 day,
 * a ceiling of at least one call per hour; anything else is ignored as absurd.
 */

export type SignalKind = 'ok' | 'slow' | 'overload';

export interface PaceSignal {
  kind: SignalKind;
  /** Hold the origin this long (ms) from now; 0 = no hold. */
  holdMs: number;
  /** The pace the target advertised (calls per second); undefined = none. */
  ceilingPerSec: number | undefined;
}

/** The shape of an outcome this module judges (the executor's CallOutcome is one). */
export type PacedOutcome =
  | { kind: 'response'; status: number; headers: Readonly<Record<string, string>> }
  | { kind: 'failure'; error: { code: string } };

/** Longest quota window believed (1 day): a longer one is a broken header. */
const MAX_WINDOW_S = 86_400;
/** Slowest pace believed: one call per hour. */
const MIN_CEILING_PER_S = 1 / 3_600;
/** Fastest pace worth pacing at: beyond it the target asks for nothing we would ever send. */
const MAX_CEILING_PER_S = 100_000;

/** A pacing reading of one outcome; `retryAfterMaxMs` bounds every hold (RETRY_AFTER_MAX). */
export function paceSignal(outcome: PacedOutcome, nowMs: number, retryAfterMaxMs: number): PaceSignal {
  const kind = signalKind(outcome, nowMs);
  if (outcome.kind === 'failure') return { kind, holdMs: 0, ceilingPerSec: undefined };
  const { headers } = outcome;
  const quota = quotaOf(headers, nowMs);
  let hold = kind === 'slow' ? (retryAfterMs(headers['retry-after'], nowMs) ?? 0) : 0;
  if (quota.exhaustedForMs !== undefined) hold = Math.max(hold, quota.exhaustedForMs);
  return { kind, holdMs: Math.min(hold, retryAfterMaxMs), ceilingPerSec: quota.perSec };
}

/**
 * The kind of `paceSignal`'s reading alone, without the headers' quota: whether the answer slows
 * the origin down or says it is overloaded.
 */
export function signalKind(outcome: PacedOutcome, nowMs: number): SignalKind {
  if (outcome.kind === 'failure') {
    const overload = outcome.error.code === 'timeout' || outcome.error.code === 'transport_error';
    return overload ? 'overload' : 'ok';
  }
  const { status } = outcome;
  if (status === 429) return 'slow';
  if (status === 503 && retryAfterMs(outcome.headers['retry-after'], nowMs) !== undefined) return 'slow';
  return status >= 500 || status === 408 ? 'overload' : 'ok';
}

/**
 * A `Retry-After` header (RFC 9110 §10.2.3) as ms from `nowMs`: delay-seconds or an HTTP-date (a
 * past date = 0); undefined when absent or unreadable.
 */
export function retryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, Number.MAX_SAFE_INTEGER);
  // An HTTP-date names its month; Date.parse alone would read e.g. "-5" as a year.
  const at = /[a-z]{3}/i.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil(at - nowMs));
}

interface Quota {
  perSec: number | undefined;
  /** The quota is used up for this long (ms); undefined = not used up (or not said). */
  exhaustedForMs: number | undefined;
}

/** The quota the rate-limit headers describe: the IETF ones first, then `X-RateLimit-*`. */
function quotaOf(headers: Readonly<Record<string, string>>, nowMs: number): Quota {
  const policy = parseFields(headers['ratelimit-policy']);
  const state = parseFields(headers.ratelimit);
  // draft ≥ 07: `"p";q=50;w=1` / `"p";r=0;t=1`; drafts ≤ 06: `50;w=1` / `limit=50, remaining=0, reset=1`.
  const limit = policy.q ?? policy.first ?? state.limit ?? numberOf(headers['x-ratelimit-limit']);
  const windowS = policy.w;
  const remaining = state.r ?? state.remaining ?? numberOf(headers['x-ratelimit-remaining']);
  const resetS = state.t ?? state.reset ?? resetSeconds(headers['x-ratelimit-reset'], nowMs);
  let perSec: number | undefined;
  if (limit !== undefined && windowS !== undefined && windowS > 0 && windowS <= MAX_WINDOW_S) {
    const pace = limit / windowS;
    if (pace >= MIN_CEILING_PER_S && pace <= MAX_CEILING_PER_S) perSec = pace;
  }
  const exhausted =
    remaining === 0 && resetS !== undefined && resetS > 0 && resetS <= MAX_WINDOW_S
      ? resetS * 1000
      : undefined;
  return { perSec, exhaustedForMs: exhausted === undefined ? undefined : Math.ceil(exhausted) };
}

/**
 * `key=value` parameters of a rate-limit header, with its first bare number as `first`
 * (`50;w=1`). Several policies (comma-separated items of the structured-field list) keep the
 * first value of each key: the first listed policy is the one we follow.
 */
function parseFields(value: string | undefined): Record<string, number | undefined> {
  const fields: Record<string, number | undefined> = {};
  if (!value) return fields;
  for (const part of value.split(/[;,]/)) {
    const text = part.trim();
    const eq = text.indexOf('=');
    if (eq < 0) {
      const bare = numberOf(text);
      if (bare !== undefined && fields.first === undefined) fields.first = bare;
      continue;
    }
    const key = text.slice(0, eq).trim().toLowerCase();
    const parsed = numberOf(text.slice(eq + 1));
    if (parsed !== undefined && fields[key] === undefined) fields[key] = parsed;
  }
  return fields;
}

/** A non-negative decimal, else undefined. */
function numberOf(value: string | undefined): number | undefined {
  const text = value?.trim().replace(/^"|"$/g, '');
  if (!text || !/^\d+(\.\d+)?$/.test(text)) return undefined;
  return Number(text);
}

/**
 * `X-RateLimit-Reset`: seconds until the reset (GitHub-style headers give an epoch instead: a
 * value past 10^9 is read as epoch seconds).
 */
function resetSeconds(value: string | undefined, nowMs: number): number | undefined {
  const n = numberOf(value);
  if (n === undefined) return undefined;
  return n > 1e9 ? n - nowMs / 1000 : n;
}
