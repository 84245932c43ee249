import {
  type LimitDecision,
  limiterKeyOf,
  limiterWindows,
  type RateLimiter,
  type Reservation,
} from '@requester/policies';
import type { LimiterSpec } from '@requester/shared/contract';
import { RequesterError } from '@requester/shared/errors';
import type { LineLogger } from '@requester/shared/log';
import { batched } from '../../worker/batch.ts';
import { limiterStep } from '../../worker/decide.ts';
import type { Attempt } from '../attempt.ts';
import type { GateSpec } from '../gate.ts';
import { type CallOrRefusal, isRefusal, refusal } from '../outcome.ts';

/**
 * The longest from a two-phase limiter take to the breaker's admission, the last step before the
 * call (a stalled event loop, a slow Redis reply): later, the call is not made and its slot is
 * given back.
 */
export const LATEST_START_MS = 5_000;

/**
 * LIMITER_DISPATCH_BUDGET's default: the latest start, then DNS lookup, TCP connect and TLS
 * handshake each bounded by TARGET_CONNECT_TIMEOUT. A call of a credential that first fetches an
 * OAuth2 token can leave later: it is then counted from its real send all the same, and
 * `limiter_late_dispatch_total` counts it (decisions made meanwhile did not see it).
 */
const DEFAULT_DISPATCH_BUDGET_MS = 20_000;

/** LIMITER_ARRIVAL_MARGIN's default. */
export const DEFAULT_ARRIVAL_MARGIN_MS = 50;

const NONE_SHARED: ReadonlySet<string> = new Set();

/**
 * The request's rate limits, after the bulkhead and before the breaker, whose admission nothing
 * may refuse after it: the caller's own (`meta.limiter`, scoped to its client), then the quota of
 * the destination it names (one for every caller); a call is made only when both grant. The
 * caller's comes first so that a refusal by the shared quota costs only the caller's own token,
 * and a refusal by the caller's never touches the shared quota. The limit holds where the target
 * counts it (docs/architecture.md §9): a sliding-log take is two-phase, counted pending until the
 * call is on the socket (`Attempt.settled`), and given back here when no call was made after all.
 * The price of coming before the breaker: a task an open breaker refuses has spent a token of any
 * other kind.
 */
export const limit: GateSpec = {
  name: 'limit',
  does: "takes a token of the request's rate limit, then of its destination's",
  exits: [
    { when: 'limited', becomes: 'wait `retryAfterMs` (not an attempt; waitTime grows)' },
    { when: 'oversized', becomes: 'error result, dead letter `permanent`' },
  ],
  link({ limiter, limiterDispatchBudgetMs, limiterArrivalMarginMs, sharedLimiterKeys }) {
    if (!limiter)
      return (attempt) => {
        if (attempt.envelope.meta.limiter || attempt.destination?.limiter)
          throw new RequesterError('invalid_config', 'this executor has no rate limiter');
        return attempt.next();
      };
    const dispatchWithinMs = limiterDispatchBudgetMs ?? DEFAULT_DISPATCH_BUDGET_MS;
    const marginMs = limiterArrivalMarginMs ?? DEFAULT_ARRIVAL_MARGIN_MS;
    // The tasks of a lease batch reach the limiter together: one round trip per batch for the
    // first limit of each, one more for the second limit of those the first granted.
    const takeBatch = () =>
      batched((specs: LimiterSpec[]) =>
        limiter.takeMany(specs.map((spec) => ({ spec, cost: spec.cost ?? 1, dispatchWithinMs }))),
      );
    const takes = [takeBatch(), takeBatch()] as const;
    const shared = sharedLimiterKeys ?? NONE_SHARED;
    const giveBack = (held: readonly Reservation[], log: LineLogger) =>
      settleSlots(limiter, held, undefined, marginMs, log);
    const limited = async (attempt: Attempt, specs: readonly LimiterSpec[]) => {
      // A bad spec fails this request alone, not the batch it would share a takeMany with.
      for (const spec of specs) limiterWindows(spec);
      const held: Reservation[] = [];
      for (const [i, spec] of specs.entries()) {
        const decision: LimitDecision = await (i === 0 ? takes[0] : takes[1])(spec);
        const step = limiterStep(decision);
        if (step.kind !== 'call') {
          // The first limit's slot goes back: no call is made under it.
          await giveBack(held, attempt.log);
          return refusal(step);
        }
        if (decision.reservation) held.push(decision.reservation);
      }
      if (held.length === 0) return attempt.next();
      // Checked before the breaker's admission, which nothing may refuse after; the budget leaves
      // room for that round trip and the connection.
      if (held.some((r) => performance.now() - r.issuedAt > LATEST_START_MS)) {
        await giveBack(held, attempt.log);
        return refusal({ kind: 'wait', delayMs: 1, reason: 'rate_limited' });
      }
      attempt.reservations = held;
      let answer: CallOrRefusal;
      try {
        answer = await attempt.next();
      } catch (err) {
        if (!attempt.settled) await giveBack(held, attempt.log);
        throw err;
      }
      // Refused after the take (the breaker): no call was made, the slots go back.
      if (isRefusal(answer) && !attempt.settled) await giveBack(held, attempt.log);
      return answer;
    };
    // A request without a limit passes with no promise of this gate's own.
    return (attempt) => {
      const own = attempt.envelope.meta.limiter;
      const pinned = attempt.destination?.limiter;
      const specs: LimiterSpec[] = [];
      if (own) specs.push({ ...own, key: limiterKeyOf(attempt.envelope.meta.client, own.key, shared) });
      // The caller's units count against the destination's quota too.
      if (pinned) specs.push(own?.cost === undefined ? pinned : { ...pinned, cost: own.cost });
      return specs.length > 0 ? limited(attempt, specs) : attempt.next();
    };
  },
};

/** Settles each of a call's two-phase limiter slots (see settleSlot). */
export async function settleSlots(
  limiter: RateLimiter,
  reservations: readonly Reservation[],
  sentAt: number | undefined,
  marginMs: number,
  log: LineLogger,
): Promise<void> {
  await Promise.all(reservations.map((r) => settleSlot(limiter, r, sentAt, marginMs, log)));
}

/**
 * Settles a two-phase limiter slot: `sentAt` the `performance.now()` of the send, undefined when
 * the call was not made (the slot goes back). A failure leaves the slot pending, counted until
 * its dispatch budget is over: more waiting for later takes, never a call too many.
 */
export async function settleSlot(
  limiter: RateLimiter,
  reservation: Reservation,
  sentAt: number | undefined,
  marginMs: number,
  log: LineLogger,
): Promise<void> {
  try {
    const { late } = await limiter.settle(reservation, sentAt, marginMs);
    if (late) log.warn({ budgetMs: reservation.budgetMs }, 'the call left after its limiter dispatch budget');
  } catch (err) {
    log.warn({ err }, 'could not settle a limiter slot; it stays counted until its dispatch budget');
  }
}
