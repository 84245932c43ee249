import { BoundedLabel, counter, gauge } from '@requester/shared/metrics';

/** Target origins with a label of their own in the pacing metrics; later ones are `other`. */
const MAX_ORIGIN_LABELS = 50;
export const originLabel = new BoundedLabel(MAX_ORIGIN_LABELS);

export const pacingMetrics = {
  limit: gauge(
    'origin_concurrency_limit',
    `adaptive concurrency limit of a target origin, last seen by this process (at most ${MAX_ORIGIN_LABELS} origins)`,
    ['origin'],
  ),
  rate: gauge(
    'origin_pace_rate',
    `calls per second a target origin is paced at (0 = unpaced), last seen by this process (at most ${MAX_ORIGIN_LABELS} origins)`,
    ['origin'],
  ),
  throttled: counter(
    'origin_throttled_total',
    'answers that lowered the pace or the concurrency limit of an origin, by signal (slow: 429 or 503 + Retry-After; overload: timeout, transport error, 5xx)',
    ['origin', 'signal'],
  ),
  waits: counter(
    'pacing_waits_total',
    'dispatches the pace delayed: `local` (the worker slept until the slot), `queued` (the task went back to the queue) or `late` (the worker woke past its slot and asked the gate again)',
    ['where'],
  ),
  errors: counter(
    'pacing_errors_total',
    'pacing calls to Redis that failed (the call then goes ahead unpaced)',
    ['op'],
  ),
};
