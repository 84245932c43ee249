import { counter } from '@requester/shared/metrics';

/** Metrics of the response cache (one registry per process, see @requester/shared metrics). */
export const cacheMetrics = {
  requests: counter(
    'cache_requests_total',
    'fetches through the response cache: hit (answered from Redis), miss (this request called the ' +
      'target), coalesced (shared the call another request of this process was making)',
    ['result'],
  ),
  waits: counter(
    'cache_waits_total',
    'waits for a fill by another process, by how they ended: value (became a hit), winner_failed ' +
      '(called the target itself), timeout (wait budget spent, called itself), took_over (the lock ' +
      'lapsed, filled it itself), error (Redis failed, called itself), other_request (the fill turned ' +
      'out to be for another request under the same key, called itself)',
    ['outcome'],
  ),
  stores: counter('cache_stores_total', '2xx responses stored'),
  skipped: counter(
    'cache_skipped_total',
    '2xx responses not stored, by reason: oversize, other_request (the key holds the answer of another request)',
    ['reason'],
  ),
  errors: counter(
    'cache_errors_total',
    'Redis failures of the cache (it then calls the target without caching), by operation',
    ['op'],
  ),
};
