import { clientScoped, type RequestEnvelope } from '@requester/shared/contract';
import { requestIdentity } from '../../cache/index.ts';
import type { Attempt } from '../attempt.ts';
import type { GateSpec } from '../gate.ts';

type CacheSpec = NonNullable<RequestEnvelope['meta']['cache']>;

/**
 * The response cache, first: a hit does not reach the target, so it spends none of its quota and
 * waits for none of its breaker; the gates after it run inside the cache fill, so N concurrent
 * misses of one key cost one token and one call. Requests that share a fill share its answer, a
 * gate's refusal included: they are the same request of the same client (key and identity).
 */
export const cache: GateSpec = {
  name: 'cache',
  does: 'serves a stored answer, or one fill per key across processes',
  exits: [{ when: 'hit', becomes: 'result (cached)' }],
  link({ cache }) {
    if (!cache) return (attempt) => attempt.next();
    const fill = async (attempt: Attempt, spec: CacheSpec) => {
      const { envelope } = attempt;
      // The client's own entry, answering only this very request (docs/architecture.md §10).
      const lookup = {
        key: clientScoped(envelope.meta.client, spec.key),
        ttl: spec.ttl,
        request: requestIdentity({ ...envelope.request, credentials: envelope.meta.credentials }),
      };
      const fetched = await cache.fetchThrough(lookup, () => attempt.next());
      if (fetched.cached) attempt.cache = 'hit';
      else if (fetched.shared) attempt.cache = 'coalesced';
      return fetched.outcome;
    };
    // A request without the cache passes with no promise of this gate's own.
    return (attempt) => {
      const spec = attempt.envelope.meta.cache;
      return spec ? fill(attempt, spec) : attempt.next();
    };
  },
};
