import type { ResultEnvelope } from '@requester/shared/contract';
import type { CallOutcome } from '../http/index.ts';
import type { DeadLetterReason, GateStep, SlotKey } from '../worker/decide.ts';

/** Where a task stands: attempts already made and time already waited (limiter, breaker). */
export interface Progress {
  tryCount: number;
  waitedMs: number;
  /** The dispatch slot its origin's pacer reserved for the task when it sent it back (Redis epoch ms). */
  pacedAt?: number | undefined;
}

/** How an attempt ended (glossary: outcome). */
export type Outcome =
  /** Final. `deadLetter`: the request failed for good, a DLQ record goes beside the result. */
  | { kind: 'result'; result: ResultEnvelope; label: string; deadLetter?: DeadLetterReason | undefined }
  /**
   * Try again in `delayMs`, with the progress the task then carries. `concurrencyKey`: a wait for
   * a slot of that key, which the task may wait for parked (ParkingLot.parkForSlot).
   */
  | { kind: 'reschedule'; delayMs: number; reason: string; progress: Progress; concurrencyKey?: SlotKey };

/**
 * A gate ending the attempt before the call (glossary: refusal): a wait, or a refusal for good.
 * Shaped as a failure for the cache, which never stores one.
 */
export interface Refusal {
  kind: 'failure';
  stop: Exclude<GateStep, { kind: 'call' }>;
}

/** What the chain of gates yields, and the cache shares: the target's answer, or a gate's refusal. */
export type CallOrRefusal = CallOutcome | Refusal;

/** A gate's refusal of `stop`. */
export function refusal(stop: Refusal['stop']): Refusal {
  return { kind: 'failure', stop };
}

/** True when a gate refused the call. */
export function isRefusal(answer: CallOrRefusal): answer is Refusal {
  return 'stop' in answer;
}
