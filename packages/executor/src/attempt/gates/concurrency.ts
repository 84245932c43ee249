import { RequesterError } from '@requester/shared/errors';
import { linePartition } from '../../bulkhead/index.ts';
import { concurrencyKeyOf } from '../../concurrency/index.ts';
import type { GateSpec } from '../gate.ts';
import { refusal } from '../outcome.ts';

/**
 * The request's concurrency key (`meta.concurrency`), after pace and before the bulkhead: a task
 * whose key is full would otherwise take a slot of its origin, shared by every caller, only to
 * give it back; and the key, the caller's narrower cap, is the one likelier to refuse. Its slot
 * is held to the answer (Attempt.answered). A refused task waits parked like one the bulkhead
 * refused, in its key's slot line (Policies.waitForSlot).
 */
export const concurrency: GateSpec = {
  name: 'concurrency',
  does: 'takes one of the calls in flight its `meta.concurrency` key allows',
  exits: [{ when: 'key full', becomes: 'wait, parked until a call of the key ends' }],
  link({ concurrency: keys }) {
    return async (attempt) => {
      const { meta } = attempt.envelope;
      const asked = meta.concurrency;
      if (!asked) {
        // Handed a key's slot while parked, and no key now (its destination dropped its cap).
        attempt.handedKey?.release();
        return attempt.next();
      }
      if (!keys) throw new RequesterError('invalid_config', 'this executor has no concurrency keys');
      const key = concurrencyKeyOf(meta.client, asked.key);
      let grant = attempt.handedKey;
      // A slot of another key (its destination's cap changed while it was parked) goes back.
      if (grant && grant.concurrencyKey !== key) {
        grant.release();
        grant = undefined;
      }
      if (!grant) {
        const partition = linePartition(meta);
        const taken = await keys.acquire(key, asked.limit, meta.client ?? '', partition);
        if (!taken.granted) {
          // A wait for a slot of this key, parked by the worker as a bulkhead wait is (its `held`
          // event then): the key rides with the wait, so no other task's wait can stand for it.
          return refusal({
            kind: 'wait',
            reason: 'concurrency',
            delayMs: Math.max(1, taken.retryInMs),
            concurrencyKey: { key, limit: asked.limit },
          });
        }
        grant = { ...taken, concurrencyKey: key };
      }
      attempt.keyGrant = grant;
      try {
        return await attempt.next();
      } finally {
        attempt.answered();
      }
    };
  },
};
