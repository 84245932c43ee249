import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import type { SignalKind } from './signals.ts';

/** The pacer's public types: its options, what the gate and a report answer, the snapshot. */

export interface OriginPacerOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `rq:pace:`. */
  prefix: string;
  /** The ceiling of the adaptive concurrency limit (MAX_WORKERS_PER_ORIGIN). */
  maxLimit: number;
  /** The longest hold a target may ask for (RETRY_AFTER_MAX). */
  retryAfterMaxMs: number;
  /**
   * A dispatch slot this close is waited for in the process (the worker sleeps); a later one sends
   * the task back to the queue. Default 250 ms: at 50 calls/s, about a dozen workers asleep.
   */
  maxLocalWaitMs?: number;
  /**
   * How far ahead dispatch slots are booked for a paced origin (default and least:
   * maxLocalWaitMs, i.e. a slot is taken only by a worker about to sleep until it): a task whose
   * slot would be farther takes none and is told when to ask again, so that a backlog goes at the
   * pace of the moment, not at the one it was booked at (see gate-1.lua). Infinity: every slot is
   * booked however far.
   */
  bookAheadMs?: number;
  /** An origin not called for this long is forgotten (default 1 h). */
  stateTtlMs?: number;
  /**
   * How long a local permission to call a free origin without a gate lasts (ms; default 0: every
   * call asks the gate). Each report renews it; the announcement of a hold, a pace or a probe ends
   * it at once. It bounds how long a lost announcement goes unheard.
   */
  freeForMs?: number;
  /**
   * How late this process reads its answers (ms), allowed for in the latency bound (default: its
   * event loop's lag, `eventLoopLagMs`; tests pass a constant to be deterministic).
   */
  loopLagMs?: () => number;
  /**
   * How long an answer of a free origin (see `freeForMs`) that is no news (no slow-down, overload or
   * advertised pace) waits for others of its origin to share its report (ms; default
   * REPORT_EVERY_MS). Under load a turn of the event loop carries few answers, so a report per turn
   * costs a script call every few tasks; the waiting answers only feed the adaptive limit and the
   * latency floor, which a few ms do not change. Other origins' answers, and all with 0: those of one turn
   * of the event loop.
   */
  reportEveryMs?: number;
  /**
   * A client's weight (the queue's, ClientWeights; default 1 each): the share of a paced origin's
   * returns its waiters beyond the booking horizon get (see gate-1.lua).
   */
  weightOf?: (client: string) => number;
  logger?: Logger;
}

export type PaceGrant =
  /** Sleep `waitMs`, then call (the slot is taken). */
  | { admitted: true; waitMs: number }
  /**
   * Not before `retryInMs`: back to the queue (or parked), not an attempt, carrying `slotMs`, the
   * slot reserved for it: given back to `gate` then, it is let through at that slot. `slotMs` 0:
   * none reserved (beyond the booking horizon, or held without a pace): it asks for one then.
   */
  | { admitted: false; retryInMs: number; slotMs: number };

export interface PaceReport {
  kind: SignalKind;
  /** The answer lowered the origin's pace or concurrency limit. */
  throttled: boolean;
  limit: number;
  /** calls/s; undefined = unpaced. */
  rate: number | undefined;
  /** How long the origin is still held (ms). */
  holdMs: number;
}

/**
 * The bulkhead's slot of a reported call: whether the limit held our calls back. Only the latency
 * of a call that took the last slot (`full`) lowers the limit step by step; a queue seen below it
 * brings the limit down to the calls in flight + 1 at most, where it binds, never under: our calls
 * queue nothing the limit could spare, whatever the target's latency (a slow receiver, a client
 * capped elsewhere), and a limit lowered under them would take away concurrency the target takes.
 */
export interface PaceSlot {
  /** Calls to the origin in flight in the bulkhead's scope when it was granted, this one included. */
  inFlight: number;
  /** It took the last slot the limit (or MAX_WORKERS_PER_ORIGIN) allowed. */
  full: boolean;
}

/** One origin's shared pace; undefined = not set. */
export interface PaceSnapshot {
  /** No call starts before it (Redis epoch ms). */
  holdUntilMs: number | undefined;
  /** calls/s. */
  rate: number | undefined;
  /** The pace the target advertised (calls/s). */
  ceiling: number | undefined;
  /** The adaptive concurrency limit applied (fractional; 1 during a probe of the floor). */
  limit: number | undefined;
  /** The next free dispatch slot of a paced origin (Redis epoch ms). */
  nextSlotMs: number | undefined;
  /**
   * The next free time of the return lane of the calls naming no client: a task beyond the booking
   * horizon asks again then (Redis epoch ms). Each client's lane is its own (see gate-1.lua).
   */
  laneMs: number | undefined;
  /** The latency without load (ms), as the last probe measured it (or less since). */
  floorMs: number | undefined;
  /** The recent latency (ms), a fast moving average. */
  recentMs: number | undefined;
  /** A probe of the floor is under way. */
  probing: boolean;
}
