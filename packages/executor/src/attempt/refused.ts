import { errorResult, type RequestEnvelope } from '@requester/shared/contract';
import { msToNs } from '@requester/shared/time';
import { addWait, capped, type DeadLetterReason, type Step, waitCap } from '../worker/decide.ts';
import type { PolicyModules } from './modules.ts';
import type { Outcome, Progress, Refusal } from './outcome.ts';

/** Which policy a wait's reason names, in the journal's `held` event. */
const HELD_BY = {
  rate_limited: 'limiter',
  circuit_open: 'breaker',
  breaker_busy: 'breaker',
  bulkhead: 'bulkhead',
  concurrency: 'concurrency',
  paced: 'pacing',
  origin_held: 'hold',
} as const;

/**
 * The outcome of a gate's refusal: a wait adds to the task's waitTime and is no attempt; an
 * oversized limiter take is an error result, dead-lettered as permanent.
 */
export function refusedOutcome(
  envelope: RequestEnvelope,
  progress: Progress,
  stop: Refusal['stop'],
  { journal, horizonMs }: Pick<PolicyModules, 'journal' | 'horizonMs'>,
): Outcome {
  if (stop.kind === 'wait') {
    const { requestId, client } = envelope.meta;
    // Past the cap the task comes back earlier and asks the gate again.
    const delayMs = capped(stop.delayMs, waitCap(envelope, horizonMs));
    // A wait for a slot (of an origin or a concurrency key) may be parked in the executor: its
    // event says how long once that is known.
    if (stop.reason !== 'bulkhead' && stop.reason !== 'concurrency')
      journal?.emit({
        type: 'held',
        requestId,
        client,
        by: HELD_BY[stop.reason],
        until: Date.now() + delayMs,
      });
    const waitedMs = addWait(progress.waitedMs, delayMs);
    // Only a pacing wait reserves a slot (not beyond the pacer's booking horizon: slotMs 0); any
    // other wait leaves the task to take a new one.
    const pacedAt =
      stop.reason === 'paced' && delayMs === stop.delayMs && stop.slotMs ? stop.slotMs : undefined;
    const outcome: Outcome = {
      kind: 'reschedule',
      delayMs,
      reason: stop.reason,
      progress: { ...progress, waitedMs, pacedAt },
    };
    return stop.concurrencyKey ? { ...outcome, concurrencyKey: stop.concurrencyKey } : outcome;
  }
  const message = 'the limiter can never admit this request: its cost exceeds a window';
  const result = errorResult(envelope.meta.requestId, 'invalid_request', message, {
    tryCount: progress.tryCount,
    waitTimeNs: msToNs(progress.waitedMs),
    proxyData: envelope.meta.proxyData,
  });
  return { kind: 'result', result, label: 'limiter_oversized', deadLetter: deadLetterOf(stop) };
}

export function deadLetterOf(step: Step): DeadLetterReason | undefined {
  return step.kind === 'deliver' ? step.deadLetter : undefined;
}
