/** The policies around a call: breaker, held origins, pacing, retries, limiter, cache. */

import { bool, goDuration, limiterKeyList, nonNegativeInt, positiveInt } from '../values.ts';
import { variable } from '../variable.ts';

export const policiesVariables = {
  breakerFailureThreshold: variable(
    'BREAKER_FAILURE_THRESHOLD',
    '5',
    positiveInt,
    'consecutive failures (transport error, timeout, 5xx, 429, 408) that open the circuit breaker of a target origin',
  ),
  breakerOpenDuration: variable(
    'BREAKER_OPEN_DURATION',
    '30s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'how long an opened breaker refuses calls before one probe may go; doubles after each failed probe',
  ),
  breakerMaxOpenDuration: variable(
    'BREAKER_MAX_OPEN_DURATION',
    '5m',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'cap on the open period of a breaker whose probes keep failing',
  ),
  originFailingHoldAfter: variable(
    'ORIGIN_FAILING_HOLD_AFTER',
    '1h',
    goDuration,
    'a target origin that has failed this long without a success (breaker failures: transport error, timeout, 5xx, 408) is held back: its tasks wait without spending attempts, one probe per BREAKER_MAX_OPEN_DURATION checks it, and it resumes when a probe succeeds (an `origin_failing` journal event, requester_origin_failing_origins); 0 = never by time',
  ),
  originFailingHoldFailures: variable(
    'ORIGIN_FAILING_HOLD_FAILURES',
    '0',
    nonNegativeInt,
    'a target origin whose breaker has counted this many failures in a row (probes included) is held back as with ORIGIN_FAILING_HOLD_AFTER, whichever comes first; 0 = never by count',
  ),
  originOptOut: variable(
    'ORIGIN_OPT_OUT',
    'true',
    bool,
    "honour a receiver's `webhook-delivery: disable` response header: its origin is held back at once (no probe) until an operator runs `requester breakers reset <origin>`; false = the header is ignored",
  ),
  breakerStateCache: variable(
    'BREAKER_STATE_CACHE',
    '500ms',
    goDuration,
    'how long an executor trusts a breaker state it read from Redis (0 = read it for every call)',
  ),
  pacingFreeFor: variable(
    'PACING_FREE_FOR',
    '1s',
    goDuration,
    "how long an executor calls an origin known free (unpaced, not held, no probe of its latency floor under way) without asking its pace in Redis first: each answer's report renews it, and a hold, a pace or a probe set by any executor ends it at once (announced on a pub/sub channel; no permission while the executor's subscriber connection is down). The dispatches are counted with the next report. 0 = every call asks (one more Redis round trip per call)",
  ),
  retryAfterMax: variable(
    'RETRY_AFTER_MAX',
    '1h',
    goDuration,
    "longest Retry-After of a target that is honoured (a retry waits the longer of its backoff and the target's Retry-After, capped here; may exceed meta.retry.maxDelay). Requests of API keys without the schedule scope have every wait capped at REDIS_HORIZON instead",
  ),
  sharedLimiterKeys: variable(
    'SHARED_LIMITER_KEYS',
    '',
    limiterKeyList,
    "limiter keys that are one quota for every caller (comma-separated `meta.limiter.key` values, e.g. a partner's quota): every request naming one, whichever API key sent it, spends and waits on the same limiter. Any other limiter key is its caller's own (the client namespace): another caller using the same name has a limiter of its own. Only the operator declares a key shared; a caller cannot",
  ),
  limiterDispatchBudget: variable(
    'LIMITER_DISPATCH_BUDGET',
    '20s',
    goDuration,
    'the latest a call rate-limited by a `sliding-window-log` leaves after its limiter decision: its slot is counted as sent at the end of this budget until the executor says when the request was really written (two-phase take), so the limit holds at the target whatever the gap between decision and send. Keep it above 5s + 3 × TARGET_CONNECT_TIMEOUT (a call not started within 5s gives its slot back; a later send is still counted, from its real instant, and counted in limiter_late_dispatch_total). A larger budget costs nothing but the slot of a call lost with its executor, held until then. 0 = counted at the decision (a window of send times may then hold more than the limit)',
  ),
  limiterArrivalMargin: variable(
    'LIMITER_ARRIVAL_MARGIN',
    '50ms',
    goDuration,
    "how much later than its send a `sliding-window-log` slot is counted, for the target's side of the wire: the limit holds by send time exactly, and a partner counting by arrival sees each call after a transit that varies from call to call (network, its own scheduling); a slot held this much longer keeps a window of arrivals within the limit while that variation stays under it. Costs at most margin ÷ window of the rate (50 ms of a 1 s window: 5 %). 0 = counted at the send",
  ),
  cacheWaitBudget: variable(
    'CACHE_WAIT_BUDGET',
    '10s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'how long a cache miss waits for another executor filling the same key before calling the target itself',
  ),
  cacheMaxEntryBytes: variable(
    'CACHE_MAX_ENTRY_BYTES',
    '262144',
    positiveInt,
    'largest response stored in the cache (status, headers and body as JSON); larger 2xx answers pass uncached',
  ),
};
