import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';

/** The breaker's public types: what `admit` and `record` answer, the options, the listings' rows. */

export type BreakerState = 'closed' | 'open' | 'half_open';

/**
 * Why an origin is held back: `failing` (its run of failures reached the bound; probes find it
 * back), `opt_out` (a receiver's answer asked to stop delivering; an operator's reset ends it).
 */
export type HoldReason = 'failing' | 'opt_out';

/** Whose breaker decided: the origin's (every caller's), or the caller's own at that origin. */
export type BreakerScope = 'origin' | 'caller';

export type Admission =
  /**
   * `ticket`: hand it back to `record` (it frees the call's slot); absent for proven origins.
   * `held`: the call is the probe of a held origin (or of the caller's held breaker: `scope`).
   * `caller`: as given to `admit`; `callerProbe`: the call is the probe of the caller's own breaker.
   */
  | {
      admitted: true;
      probe: boolean;
      ticket?: string;
      held?: HoldReason;
      scope?: BreakerScope;
      caller?: string;
      callerProbe?: boolean;
    }
  /**
   * `retryAtMs`: local epoch ms when the origin may take calls again (reschedule the task there).
   * `held`: the origin is held back (the task waits for its next probe instant).
   */
  | { admitted: false; retryAtMs: number; state: BreakerState; held?: HoldReason; scope?: BreakerScope };

/**
 * Thresholds of one breaker that differ from the deployment's (a destination's own breaker): given
 * with each admit and record of its calls, as the scripts take them per call.
 */
export interface BreakerSettings {
  failureThreshold?: number | undefined;
  openMs?: number | undefined;
  maxOpenMs?: number | undefined;
}

/** What `record` needs: `{ ...admission, success }`. */
export interface CallReport {
  /** The breaker's own thresholds, as given to `admit`. */
  settings?: BreakerSettings | undefined;
  success: boolean;
  probe: boolean;
  ticket?: string | undefined;
  /** The answer carried the receiver's opt-out (`webhook-delivery: disable`): hold the caller (or, without one, the origin). */
  optOut?: boolean | undefined;
  /** The caller given to `admit` (undefined: the origin's breaker alone). */
  caller?: string | undefined;
  callerProbe?: boolean | undefined;
}

/** A hold that began or ended with a recorded outcome (times are local epoch ms). */
export interface HoldChange {
  kind: 'began' | 'ended';
  reason: HoldReason;
  /** When the hold began. */
  sinceMs: number;
  /** Failures in the run (when it ended: before the success that ended it). */
  failures: number;
  /** When the run of failures began (undefined: none, e.g. an opt-out after a success). */
  failingSinceMs: number | undefined;
  /** `caller`: the hold is the caller's own breaker's at the origin, not the origin's. */
  scope: BreakerScope;
}

/** What `record` learnt: whether the origin is held after the outcome, and a hold that began or ended. */
export interface RecordOutcome {
  held?: HoldReason;
  /** Held: the next probe instant (local epoch ms), where a task of the origin should wait. */
  retryAtMs?: number;
  /** Whose breaker is held: the origin's, or the caller's own. */
  scope?: BreakerScope;
  change?: HoldChange;
}

export interface HeldOrigin {
  origin: string;
  /** Set when the hold is this caller's own breaker at the origin (its calls alone wait). */
  client?: string;
  reason: HoldReason;
  /** Local epoch ms. */
  sinceMs: number;
  failures: number;
  failingSinceMs: number | undefined;
  /** When the next probe may go (local epoch ms; past while it is out, or for an opt-out nobody asked about since). */
  nextProbeMs: number | undefined;
}

export interface CircuitBreakerOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `rq:breaker:`. */
  prefix: string;
  failureThreshold: number;
  /** First open period; each failed probe doubles it, up to maxOpenMs. */
  openMs: number;
  /** How long an executor trusts what it last learnt of an origin (0 = ask Redis every time). */
  stateCacheMs: number;
  /** Cap on the open period (default 10 × openMs). */
  maxOpenMs?: number;
  /** How long a probe or trial slot is held when its caller never reports (default 60 s): longer than any call. */
  trialLeaseMs?: number;
  /** When a caller refused by a busy origin (probe or trial slots taken) should come back (default 1 s). */
  busyRetryMs?: number;
  /** An origin not heard of for this long (beyond its open period) is forgotten (default 1 h). */
  stateTtlMs?: number;
  /** Origins remembered locally (LRU), default 10,000. */
  maxCachedOrigins?: number;
  /** A run of failures this long (without a success) holds the origin back; 0 = never (default). */
  holdAfterMs?: number;
  /** A run of this many failures holds the origin back; 0 = never (default). */
  holdFailures?: number;
  /** The probe period of a held origin (default maxOpenMs). */
  holdPeriodMs?: number;
  logger?: Logger;
}

export interface OpenOrigin {
  origin: string;
  state: 'open' | 'half_open';
  /** Local epoch ms when it half-opens (past for half-open). */
  retryAtMs: number;
  /** Local epoch ms when its current run of opens began. */
  openSinceMs: number;
}

export interface BreakerSnapshot {
  state: BreakerState;
  /** Consecutive failures while closed; undefined = not seen yet (or forgotten). */
  failures: number | undefined;
  /** Opens in a row (0 when closed). */
  opens: number;
  /** Local epoch ms; set when open or half-open. */
  openUntilMs: number | undefined;
  openSinceMs: number | undefined;
  /** Probe / trial slots held now. */
  slots: number;
  /** Held back, and since when (local epoch ms). */
  held: HoldReason | undefined;
  heldSinceMs: number | undefined;
  /** The run of failures since the last success: how many, since when (local epoch ms). */
  runFailures: number;
  failingSinceMs: number | undefined;
}
