import { type Admission, countsAsFailure, type LimitDecision } from '@requester/policies';
import { DEAD_LETTER_REASONS, type RetrySpec } from '@requester/shared/contract';
import { durationToMs, MAX_DURATION_NS, toMs } from '@requester/shared/time';
import type { CallOutcome } from '../http/index.ts';

/**
 * The executor's decisions (docs/architecture.md §5 "Executor decisions") as pure functions of the facts:
 * no I/O, no clock and no randomness of their own (both are passed in), so each rule is tested on
 * its own (decide.unit.test.ts). The worker gathers the facts and carries the steps out.
 *
 *   gate (limiter, breaker) ──call──▶ HTTP ──▶ outcome ──▶ deliver | retry
 *        └─wait───────────────────────────────────────────▶ reschedule, not an attempt
 */

export type DeadLetterReason = (typeof DEAD_LETTER_REASONS)[keyof typeof DEAD_LETTER_REASONS];

/**
 * The longest wait any step asks for: the range of a Go duration (~292 years), so no accepted
 * `delay`, `maxDelay`, limiter window or `Retry-After` is cut shorter than it says, and the queue
 * (due times up to year 2527) and the outbox can hold now + this.
 */
export const MAX_DELAY_MS = toMs(MAX_DURATION_NS);

/** A wait the queue accepts: whole ms in [0, MAX_DELAY_MS]. Anything else is a bug upstream. */
export function isQueueDelay(delayMs: number): boolean {
  return Number.isSafeInteger(delayMs) && delayMs >= 0 && delayMs <= MAX_DELAY_MS;
}

/** Whole ms within [min, MAX_DELAY_MS]: an infinite ask becomes the longest wait. */
function clampDelay(ms: number, min: number): number {
  return Math.min(Math.max(Math.ceil(ms), min), MAX_DELAY_MS);
}

/** Time waited so far plus one more wait, kept within the same bound. */
export function addWait(waitedMs: number, delayMs: number): number {
  return Math.min(waitedMs + delayMs, MAX_DELAY_MS);
}

/** What happens to a task next. */
export type Step =
  /** Go on: the gate let the call through. */
  | { kind: 'call' }
  /**
   * Not now, and not an attempt (tryCount unchanged): the limiter, the breaker, the bulkhead or
   * the origin's pace said when to come back. The wait is added to the task's waitTime.
   */
  | {
      kind: 'wait';
      delayMs: number;
      reason:
        | 'rate_limited'
        | 'circuit_open'
        | 'breaker_busy'
        | 'bulkhead'
        | 'concurrency'
        | 'paced'
        | 'origin_held';
      /** `paced`: the dispatch slot reserved for the task (Redis epoch ms), carried back to the pacer. */
      slotMs?: number;
      /** `concurrency`: the key (in its namespace) and limit whose slot the task waits for, parked. */
      concurrencyKey?: SlotKey;
    }
  /** The attempt failed in a way another one may fix, and the retry budget has one left. */
  | { kind: 'retry'; delayMs: number; reason: string }
  /** Final: the result goes to `out`; with `deadLetter`, a dead-letter record beside it. */
  | { kind: 'deliver'; deadLetter?: DeadLetterReason };

/** A concurrency key (in its client's namespace, see concurrencyKeyOf) and its limit. */
export interface SlotKey {
  key: string;
  limit: number;
}

/** What a gate (limiter, breaker) may say: never a retry, since nothing was attempted. */
export type GateStep = Exclude<Step, { kind: 'retry' }>;

export const CALL: GateStep = { kind: 'call' };

/** The limiter's answer: `oversized` can never be admitted, so it is a permanent failure. */
export function limiterStep(decision: Pick<LimitDecision, 'outcome' | 'retryAfterMs'>): GateStep {
  if (decision.outcome === 'allowed') return CALL;
  if (decision.outcome === 'limited')
    return { kind: 'wait', delayMs: clampDelay(decision.retryAfterMs, 1), reason: 'rate_limited' };
  return { kind: 'deliver', deadLetter: DEAD_LETTER_REASONS.permanent };
}

/**
 * An origin whose breaker refuses is come back to at its `retryAtMs`. `circuit_open` only when the
 * breaker is open; a closed or half-open breaker refuses when its trial or probe slots are all
 * held by calls in flight (`breaker_busy`): the origin is not known to be down. A held origin
 * (failing-held, or at the receiver's request) is `origin_held`, whatever its breaker's state.
 */
export function breakerStep(admission: Admission, nowMs: number): GateStep {
  if (admission.admitted) return CALL;
  return {
    kind: 'wait',
    delayMs: clampDelay(admission.retryAtMs - nowMs, 1),
    reason: admission.held ? 'origin_held' : admission.state === 'open' ? 'circuit_open' : 'breaker_busy',
  };
}

/**
 * The probe of a held origin that failed, the origin still held: a wait until its next probe
 * instant, not an attempt. The origin being down is no fault of the request, and counting each
 * probe against a task would spend its budget at one call per hold period.
 */
export function heldProbeStep(retryAtMs: number, nowMs: number): Extract<Step, { kind: 'wait' }> {
  return { kind: 'wait', delayMs: clampDelay(retryAtMs - nowMs, 1), reason: 'origin_held' };
}

/** The receiver's opt-out (Svix's delivery control): `webhook-delivery: disable` on an answer. */
export function optsOut(outcome: CallOutcome): boolean {
  if (outcome.kind !== 'response') return false;
  const value = outcome.headers['webhook-delivery'];
  return value?.split(',').some((token) => token.trim().toLowerCase() === 'disable') === true;
}

/** An origin at its cap of calls in flight (the bulkhead) is come back to when a slot is likely free. */
export function bulkheadStep(grant: { granted: true } | { granted: false; retryInMs: number }): GateStep {
  if (grant.granted) return CALL;
  return { kind: 'wait', delayMs: Math.max(1, grant.retryInMs), reason: 'bulkhead' };
}

/**
 * An origin held or paced (OriginPacer) is come back to at the time promised: the target asked for
 * it, so coming back earlier would only be refused again.
 */
export function pacedStep(
  grant: { admitted: true } | { admitted: false; retryInMs: number; slotMs: number },
): GateStep {
  if (grant.admitted) return CALL;
  return { kind: 'wait', delayMs: clampDelay(grant.retryInMs, 1), reason: 'paced', slotMs: grant.slotMs };
}

/**
 * What the breaker counts as a failure: those of `countsAsFailure`, except the target asking to
 * slow down (429, 503 with `Retry-After`): a target that says when to come back is up, and its
 * pace is the pacer's business (docs/architecture.md §9), not a reason to stop calling it.
 */
export function breakerFailure(outcome: CallOutcome): boolean {
  if (!countsAsFailure(outcome)) return false;
  if (outcome.kind !== 'response') return true;
  return !(
    outcome.status === 429 ||
    (outcome.status === 503 && outcome.headers['retry-after'] !== undefined)
  );
}

/**
 * The outcomes another attempt may fix: 429, 408, 5xx, timeouts and transport errors (refused,
 * reset, DNS). They are exactly those the breaker counts as the target being down, overloaded or
 * slow; other answers (4xx) are the target's verdict, and a call the SSRF guard refused or an
 * answer over the size cap would fail the same way again. Also `credential_unavailable` (the
 * credential's token endpoint failed), which the breaker does not count against the target.
 */
export function isRetryable(outcome: CallOutcome): boolean {
  // A token endpoint (or credential store) that failed may be back by the next attempt; it is not the target's fault.
  return (
    countsAsFailure(outcome) ||
    (outcome.kind === 'failure' && outcome.error.code === 'credential_unavailable')
  );
}

/** A final outcome is a failure when the target answered >= 400 or no answer came. */
export function isFailure(outcome: CallOutcome): boolean {
  return outcome.kind === 'failure' || outcome.status >= 400;
}

export interface OutcomeFacts {
  outcome: CallOutcome;
  /** `meta.retry`; absent = one attempt, every outcome delivered. */
  retry: RetrySpec | undefined;
  /** Attempts made within the retry budget, this one included (see attemptsInBudget). */
  attempts: number;
  nowMs: number;
  /** Uniform in [0, 1): the jitter's dice. */
  random: number;
  /** Longest `Retry-After` honoured (RETRY_AFTER_MAX). */
  retryAfterMaxMs: number;
  /** Longest pause of any kind (see waitCap); undefined = none beyond the others. */
  maxWaitMs?: number | undefined;
}

/**
 * After a call: a success or a 3xx is delivered; a retryable failure is retried while attempts
 * remain (`attempts < retry.max`); any other failure is delivered and dead-lettered, as
 * `retries_exhausted` when retrying could have helped, else `permanent`. Without `meta.retry` the
 * budget is one attempt, so a failure is dead-lettered the same way (DLQ replay is the way back).
 *
 * The pause is the backoff, or the target's `Retry-After` when that asks for longer: coming back
 * earlier would only spend an attempt on another refusal. The target's word may exceed
 * `maxDelay` (which bounds our own backoff) but not RETRY_AFTER_MAX, so a broken or hostile
 * header cannot park a task for days.
 */
export function outcomeStep(facts: OutcomeFacts): Step {
  const { outcome, retry } = facts;
  if (!isFailure(outcome)) return { kind: 'deliver' };
  if (!isRetryable(outcome)) return { kind: 'deliver', deadLetter: DEAD_LETTER_REASONS.permanent };
  if (!retry || facts.attempts >= retry.max)
    return { kind: 'deliver', deadLetter: DEAD_LETTER_REASONS.retriesExhausted };
  const backoff = backoffMs(retry, facts.attempts, facts.random);
  const asked =
    outcome.kind === 'response' ? retryAfterMs(outcome.headers['retry-after'], facts.nowMs) : undefined;
  const pause = asked === undefined ? backoff : Math.max(backoff, Math.min(asked, facts.retryAfterMaxMs));
  return {
    kind: 'retry',
    delayMs: capped(pause, facts.maxWaitMs),
    reason: outcome.kind === 'response' ? `status_${outcome.status}` : outcome.error.code,
  };
}

/**
 * The longest a task may wait at a time: REDIS_HORIZON when its API key lacks the `schedule` scope
 * (the ingress marks its envelope `withinHorizon`), so that no path — retry pause, a target's
 * Retry-After, a limiter or a breaker — parks it further ahead than the key may schedule.
 */
export function waitCap(envelope: { withinHorizon?: true | undefined }, horizonMs: number | undefined) {
  return envelope.withinHorizon ? horizonMs : undefined;
}

/** `delayMs` within `capMs` (undefined = no cap). */
export function capped(delayMs: number, capMs: number | undefined): number {
  return capMs === undefined ? delayMs : Math.min(delayMs, capMs);
}

/**
 * The pause after the `attempt`-th attempt failed: `delay · multiplier^(attempt−1)`, capped at
 * `maxDelay`, then moved by up to ±`jitter` of itself (so executors retrying together spread out)
 * and capped again: `maxDelay` is never exceeded, so at the cap the jitter only shortens.
 * Total: whole ms in [0, maxDelay] for every accepted spec and `random` in [0, 1), however large
 * the multiplier (its power may be Infinity, and 0 · Infinity would be NaN).
 */
export function backoffMs(retry: RetrySpec, attempt: number, random: number): number {
  const maxDelay = durationToMs(retry.maxDelay);
  const delay = durationToMs(retry.delay);
  const growth = retry.multiplier ** Math.max(0, attempt - 1);
  const base = delay === 0 ? 0 : Math.min(delay * growth, maxDelay);
  const jittered = base * (1 + retry.jitter * (2 * random - 1));
  return Math.max(0, Math.round(Math.min(jittered, maxDelay)));
}

/**
 * A `Retry-After` header (RFC 9110 §10.2.3) as ms from `nowMs`: delay-seconds or an HTTP-date
 * (a past date = 0), at most MAX_DELAY_MS. undefined when absent or unreadable: then only the backoff applies.
 */
export function retryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  // Within MAX_DELAY_MS: a 400-digit delay-seconds is Infinity as a number.
  if (/^\d+$/.test(text)) return clampDelay(Number(text) * 1000, 0);
  // An HTTP-date names its month; Date.parse alone would read e.g. "-5" as a year.
  const at = /[a-z]{3}/i.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(at) ? undefined : clampDelay(at - nowMs, 0);
}

/**
 * Whether a task whose next start would be at `startAt` (epoch ms) misses its start-by deadline
 * (`meta.deadline`, epoch ms): it then ends `expired` at once instead of waiting for a start that
 * is already too late. A start at the deadline itself is too late.
 */
export function missesDeadline(deadlineAt: number, startAt: number): boolean {
  return startAt >= deadlineAt;
}

/**
 * Where a rescheduled task waits. Ordered partitions stay in Redis whatever the delay: the task
 * keeps its place at the head and the partition stays blocked (docs/architecture.md §9). Unordered ones stay
 * in Redis within the horizon; beyond it they go to the outbox with their full envelope, so a long
 * wait neither holds Redis memory nor outlives the `in` record's retention.
 */
export function placeOf(delayMs: number, ordered: boolean, horizonMs: number): 'redis' | 'outbox' {
  return ordered || delayMs <= horizonMs ? 'redis' : 'outbox';
}

/**
 * The farthest a task waits parked in its executor (docs/architecture.md §9): it keeps its lease
 * (renewed by the heartbeat like a call in flight; a parked task whose lease may have lapsed is
 * not called, so a crashed or cut-off executor's task is leased again once the lease lapses) but
 * no worker. A longer wait goes back to the queue, as do waits beyond the parking budget. 30 s
 * (10 s before) covers a burst's wait at a target's pace (400 tasks at 31.5/s: 13 s; booked or,
 * for an origin that advertised its pace, in the pacer's return lane) and a bulkhead slot behind a
 * backlog; the heartbeat and the budget bound what holding them costs, and a cancel is seen at the end of
 * the wait, as it would be when the task came back from the queue then.
 */
export const PARK_MAX_MS = 30_000;

/**
 * The breaker refusals in a row (`breaker_busy`) a task waits out parked: one re-check of the
 * breaker per wait (its `busyRetryMs`, 1 s by default), then the queue. A busy breaker is a new
 * or just-failed origin's few trial calls in flight, over once they answer; one that stays busy
 * (a trial call that never reports holds its slot for the longest call) is not worth a lease.
 */
export const BUSY_PARKS_MAX = 3;

/** Parked tasks, or the most of them an executor keeps (EXECUTOR_PARKED_TASKS, EXECUTOR_PARKED_BYTES). */
export interface Parking {
  tasks: number;
  /** What their `in` records and queued tasks hold in memory. */
  bytes: number;
}

/**
 * Whether a task sent back (`reason`, waiting `delayMs`) is parked instead, holding `bytes` more,
 * with `parked` already parked out of `budget`; `busyParks`: the `breaker_busy` waits in a row it
 * has already waited out parked. Parked: a pacing slot, a retry (still an attempt: its tryCount
 * was counted when it failed), a busy breaker (at most BUSY_PARKS_MAX in a row). Not parked: an
 * open breaker or a held origin (down, for long), the limiter, the bulkhead, a pause. Shared with
 * bench/pacing.ts, whose simulated executors park the same way.
 */
export function parks(
  reason: string,
  delayMs: number,
  bytes: number,
  parked: Parking,
  budget: Parking,
  busyParks = 0,
): boolean {
  return (
    (reason === 'paced' || reason === 'retry' || (reason === 'breaker_busy' && busyParks < BUSY_PARKS_MAX)) &&
    delayMs <= PARK_MAX_MS &&
    waitsForSlot(bytes, parked, budget)
  );
}

/**
 * Whether a task the bulkhead refused (its origin at its cap of calls in flight) waits parked for
 * a slot, holding `bytes` more, with `parked` already parked out of `budget`: woken when a call of
 * this process to its origin ends, or sent back to the queue after PARK_MAX_MS. Before, it went
 * back to the queue at once, for a guess of when a slot frees (waitForSlotMs), and was leased
 * again then: about one call in two under load. The parking budget
 * alone: also the last test of `parks`.
 */
export function waitsForSlot(bytes: number, parked: Parking, budget: Parking): boolean {
  return parked.tasks < budget.tasks && parked.bytes + bytes <= budget.bytes;
}
