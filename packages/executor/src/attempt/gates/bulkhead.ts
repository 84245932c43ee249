import { linePartition } from '../../bulkhead/index.ts';
import { bulkheadStep } from '../../worker/decide.ts';
import type { GateSpec } from '../gate.ts';
import { refusal } from '../outcome.ts';

/**
 * The cap of an origin's calls in flight (MAX_WORKERS_PER_ORIGIN, lowered to the pacer's learnt
 * limit under ADAPTIVE_CONCURRENCY), before the limiter: a task refused by a full origin comes
 * back again and again while the origin hangs, and after the limiter each of those polls would
 * spend a token. Its slot is held to the answer (see Attempt.answered) and freed whatever happens.
 */
export const bulkhead: GateSpec = {
  name: 'bulkhead',
  does: "takes one of the origin's slots of calls in flight",
  exits: [{ when: 'origin full', becomes: 'wait, parked until a call of the origin ends' }],
  link({ bulkhead, pacer, adaptiveConcurrency = true }) {
    // Without a bulkhead no slot is ever handed either (Policies.waitForSlot).
    if (!bulkhead) return (attempt) => attempt.next();
    return async (attempt) => {
      const { handed, origin } = attempt;
      let grant = handed;
      if (!grant) {
        // A destination with pacing off is held to the fixed cap, not to what the pace learnt.
        const learnt =
          adaptiveConcurrency && attempt.paced ? pacer?.limitOf(origin, attempt.identity) : undefined;
        const { meta } = attempt.envelope;
        const asked = await bulkhead.acquire(origin, learnt, meta.client, true, linePartition(meta));
        const full = bulkheadStep(asked);
        if (full.kind !== 'call') return refusal(full);
        if (asked.granted) grant = asked;
      }
      attempt.grant = grant;
      if (grant) attempt.slot = { inFlight: grant.inFlight, full: grant.full };
      try {
        return await attempt.next();
      } finally {
        attempt.answered();
      }
    };
  },
};
