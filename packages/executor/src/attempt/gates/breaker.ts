import type { Admission, BreakerSettings } from '@requester/policies';
import { batched } from '../../worker/batch.ts';
import { breakerStep } from '../../worker/decide.ts';
import type { GateSpec } from '../gate.ts';
import { refusal } from '../outcome.ts';

/**
 * The origin's circuit breaker (or its destination's own, with its thresholds), last: an
 * admission may hold a half-open probe or a trial slot, which only the recorded answer gives back
 * (see report.ts), so nothing may refuse the call after it. The caller is the client: its failures open its own breaker at the origin, and the origin's
 * only once other clients fail too (docs/architecture.md §9, "whose trouble").
 */
export const breaker: GateSpec = {
  name: 'breaker',
  does: "asks the origin's breaker (and the client's at the origin) to admit the call",
  exits: [
    { when: 'open', becomes: 'wait until it half-opens (`circuit_open`)' },
    { when: 'trial slots taken', becomes: 'wait (`breaker_busy`)' },
    { when: 'origin held', becomes: 'wait until its next probe (`origin_held`)' },
  ],
  link({ breaker }) {
    if (!breaker) return (attempt) => attempt.next();
    // The tasks of a lease batch reach the breaker together: one round trip per batch.
    const admit = batched(
      (calls: Array<{ origin: string; caller: string; settings: BreakerSettings | undefined }>) =>
        breaker.admitMany(calls),
    );
    return async (attempt) => {
      const admission: Admission = await admit({
        origin: attempt.breakerKey,
        caller: attempt.envelope.meta.client ?? '',
        settings: attempt.destination?.breaker,
      });
      const opened = breakerStep(admission, Date.now());
      if (opened.kind !== 'call') return refusal(opened);
      attempt.admission = admission;
      return attempt.next();
    };
  },
};
