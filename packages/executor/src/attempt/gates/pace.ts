import type { OriginPacer } from '@requester/policies';
import { pacedStep } from '../../worker/decide.ts';
import type { Attempt } from '../attempt.ts';
import type { GateSpec } from '../gate.ts';
import { type Refusal, refusal } from '../outcome.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The origin's pace (OriginPacer: what the target asked for, shared in Redis), before the
 * bulkhead: a dispatch slot a few ms ahead is slept for in the worker, holding none of the
 * origin's concurrency; a later one is reserved and the task waits until then (not an attempt).
 * The pacer batches its own round trips: a gate of an origin known free is none. The call's client
 * is named, so that a backlog beyond the booking horizon waits in its client's own return lane.
 */
export const pace: GateSpec = {
  name: 'pace',
  does: "sleeps until the origin's next dispatch slot when it is near",
  exits: [{ when: 'origin held or paced', becomes: 'wait until the slot reserved for the task' }],
  link({ pacer }) {
    if (!pacer) return (attempt) => attempt.next();
    return async (attempt) => {
      // A destination with pacing off: its calls neither wait for the origin's pace nor hold.
      if (!attempt.paced) return attempt.next();
      const held = await paced(pacer, attempt);
      return held ?? attempt.next();
    };
  },
};

/**
 * The pace's gate, and the sleep until the slot it gives: undefined when the call may leave, else
 * the refusal that holds it back. A call woken well past its slot (a stalled process wakes all its
 * sleepers at once, and they would reach the target together, inside one window of a partner
 * that counts by arrival) asks the gate once more for a slot of now, instead of leaving late.
 */
async function paced(pacer: OriginPacer, attempt: Attempt): Promise<Refusal | undefined> {
  const { origin, identity } = attempt;
  for (let gates = 1; ; gates++) {
    const askedAt = performance.now();
    const paced = await pacer.gate(
      origin,
      gates === 1 ? attempt.pacedAt : undefined,
      identity,
      attempt.envelope.meta.client ?? '',
    );
    const held = pacedStep(paced);
    if (held.kind !== 'call') return refusal(held);
    if (!paced.admitted || paced.waitMs <= 0) return undefined;
    const admittedAt = Date.now();
    await sleep(paced.waitMs);
    // A 429 answered here while it slept holds the origin: its slot went with the hold (the gate
    // asked now would say so), and it would arrive inside it. Back to the gate at the hold's end.
    const heldMs = pacer.heldForMs(origin, admittedAt, Date.now(), identity);
    if (heldMs > 0) return refusal({ kind: 'wait', delayMs: heldMs, reason: 'paced' });
    const lateMs = performance.now() - askedAt - paced.waitMs;
    if (gates > 1 || lateMs <= pacer.lateToleranceMs(origin, identity)) return undefined;
    pacer.countLate();
  }
}
