import type { LimiterAlgorithm, LimiterSpec } from '@requester/shared/contract';
import { RequesterError } from '@requester/shared/errors';
import { counter } from '@requester/shared/metrics';
import type { RedisClient } from '@requester/shared/redis';
import { type LimiterScripts, type LimitOutcome, loadLimiterScripts, type TakeReply } from './scripts.ts';
import { type LimiterCall, limiterCall } from './spec.ts';

export { longestQuotaPeriodMs, type QuotaPeriodSpan, quotaPeriod } from './calendar.ts';
export { inspectLimiter, type LimiterWindowState } from './inspect.ts';
export type { LimitOutcome } from './scripts.ts';
export {
  type LimiterWindow,
  limiterKeyOf,
  limiterKeys,
  limiterWindows,
  longestWaitMs,
  quotaKey,
} from './spec.ts';

export interface LimitDecision {
  outcome: LimitOutcome;
  /** `outcome === 'allowed'`. */
  allowed: boolean;
  /** When limited: the longest wait over the denying windows (ms, >= 1); else 0. */
  retryAfterMs: number;
  /** Calls of cost 1 the tightest window still admits (after this take when allowed). */
  remaining: number;
  /** The Redis clock at the decision (ms since the epoch, microsecond fraction): the queue's clock. */
  atMs: number;
  /** An allowed two-phase take (sliding log, `dispatchWithinMs` > 0): settle it with `settle`. */
  reservation?: Reservation;
}

/**
 * The pending entries of an allowed two-phase take (commands/slidingLog-n.lua): counted as sent at
 * the latest instant allowed (decision + budget) until `settle` says when the call really left.
 */
export interface Reservation {
  /** The limiter's log key. */
  key: string;
  /** The head of its entries' members. */
  head: string;
  cost: number;
  /** The Redis clock of the decision, microseconds. */
  atUs: number;
  /** `performance.now()` just before the take left for Redis: the decision came after it. */
  issuedAt: number;
  /** The dispatch budget the take was made with (ms). */
  budgetMs: number;
}

export interface LimitRequest {
  spec: LimiterSpec;
  /** Calls this take counts for (integer >= 1); 1 by default. */
  cost?: number;
  /**
   * The latest the call will be sent after the decision (ms): a sliding-log take is then two-phase,
   * counted by the instant the call is sent (`settle`), not by the decision. 0 (default): counted
   * at the decision. The other algorithms ignore it.
   */
  dispatchWithinMs?: number;
}

export interface RateLimiterOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `rq:`; must not contain braces (the hash tag is the limiter's own). */
  prefix: string;
  /** The clock a calendar quota's period is reckoned by (epoch ms); `Date.now` by default. */
  clock?: () => number;
}

const decisions = counter('limiter_decisions_total', 'rate limiter decisions, by algorithm and outcome', [
  'algorithm',
  'outcome',
]);

function checkedCost(cost: number): number {
  if (!Number.isSafeInteger(cost) || cost < 1)
    throw new RangeError(`limiter cost must be an integer >= 1: ${cost}`);
  return cost;
}

const lateDispatches = counter(
  'limiter_late_dispatch_total',
  'two-phase limiter takes whose call left after its dispatch budget (counted late)',
);

function decided(
  algorithm: LimiterAlgorithm,
  reply: TakeReply,
  call: LimiterCall,
  issuedAt: number,
): LimitDecision {
  decisions.inc({ algorithm, outcome: reply.outcome });
  const { reservation: head, ...rest } = reply;
  const decision: LimitDecision = { ...rest, allowed: reply.outcome === 'allowed' };
  if (head !== undefined) {
    decision.reservation = {
      key: call.keys[0]!,
      head,
      cost: call.args[0]!,
      atUs: Math.round(reply.atMs * 1000),
      issuedAt,
      budgetMs: call.args[1]!,
    };
  }
  return decision;
}

function checkedBudget(ms: number | undefined): number {
  if (ms === undefined) return 0;
  if (!Number.isSafeInteger(ms) || ms < 0)
    throw new RangeError(`dispatch budget must be an integer >= 0: ${ms}`);
  return ms;
}

function unavailable(err: unknown): RequesterError {
  if (err instanceof RequesterError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new RequesterError('dependency_unavailable', `rate limiter: ${message}`, { cause: err });
}

/**
 * Rate limits of docs/architecture.md §9 in Redis: one Lua script per take checks every window of the
 * limiter and its calendar quota, and consumes from all of them only when all allow. The windows'
 * time is the Redis clock; a quota's period is reckoned by `clock`.
 */
export class RateLimiter {
  readonly #prefix: string;
  readonly #scripts: LimiterScripts;
  readonly #clock: () => number;

  constructor(options: RateLimiterOptions) {
    if (/[{}]/.test(options.prefix)) {
      throw new RangeError(`limiter prefix must not contain braces: ${JSON.stringify(options.prefix)}`);
    }
    this.#prefix = options.prefix;
    this.#scripts = loadLimiterScripts(options.redis);
    this.#clock = options.clock ?? Date.now;
  }

  /** Takes `cost` calls from the limiter `spec` names, or says how long to wait. */
  async take(spec: LimiterSpec, cost = 1, dispatchWithinMs = 0): Promise<LimitDecision> {
    const call = limiterCall(
      this.#prefix,
      spec,
      checkedCost(cost),
      checkedBudget(dispatchWithinMs),
      this.#clock(),
    );
    const issuedAt = performance.now();
    let reply: TakeReply;
    try {
      reply = await this.#scripts.take(call);
    } catch (err) {
      throw unavailable(err);
    }
    return decided(spec.algorithm, reply, call, issuedAt);
  }

  /** Several takes in one round trip (a lease batch), decided in array order (`LimiterScripts.takeMany`). */
  async takeMany(requests: readonly LimitRequest[]): Promise<LimitDecision[]> {
    const nowMs = this.#clock();
    const calls = requests.map((r) =>
      limiterCall(this.#prefix, r.spec, checkedCost(r.cost ?? 1), checkedBudget(r.dispatchWithinMs), nowMs),
    );
    const issuedAt = performance.now();
    let replies: TakeReply[];
    try {
      replies = await this.#scripts.takeMany(calls);
    } catch (err) {
      throw unavailable(err);
    }
    return replies.map((reply, i) => decided(requests[i]!.spec.algorithm, reply, calls[i]!, issuedAt));
  }

  /**
   * Settles a two-phase take: `sentAt` is a `performance.now()` taken once the call was handed to
   * the socket (an upper bound of its send), undefined when it was never sent (its slot is given
   * back). The send is written on the Redis clock as the decision + the time since the take left
   * (an upper bound: the decision came after that). Returns whether the call left late, after its
   * budget (then counted from its real send all the same; decisions made meanwhile could not see it).
   * `marginMs`: the entry counts from that much after the send (LIMITER_ARRIVAL_MARGIN), so that a
   * target counting by arrival, each call after a transit of its own, sees the limit too.
   */
  async settle(
    reservation: Reservation,
    sentAt: number | undefined,
    marginMs = 0,
  ): Promise<{ late: boolean }> {
    // Rounded up to whole microseconds (less a nanosecond of floating-point noise).
    const elapsedUs = sentAt === undefined ? -1 : Math.ceil((sentAt - reservation.issuedAt) * 1000 - 1e-3);
    const sentUs = sentAt === undefined ? -1 : reservation.atUs + elapsedUs + Math.round(marginMs * 1000);
    const late = elapsedUs > reservation.budgetMs * 1000;
    if (late) lateDispatches.inc();
    try {
      await this.#scripts.confirm(reservation.key, reservation.head, reservation.cost, sentUs);
    } catch (err) {
      throw unavailable(err);
    }
    return { late };
  }
}
