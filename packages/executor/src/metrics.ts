import { BoundedLabel, counter, gauge, histogram } from '@requester/shared/metrics';

/** Target origins with a label of their own in the per-origin metrics; later ones are `other`. */
export const MAX_ORIGIN_LABELS = 50;

/** Destinations with a label of their own in the per-destination metrics; later ones are `other`. */
export const MAX_DESTINATION_LABELS = 200;

/**
 * From acceptance to the result on `out`: retries and waits included, so beyond the call buckets
 * (a retried request takes minutes; beyond the Redis horizon, hours).
 */
const END_TO_END_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600];

/** The executor's metrics (one registry per process, see @requester/shared metrics). */
export const executorMetrics = {
  tasks: counter(
    'executor_tasks_total',
    'tasks settled by the executor, by outcome (status class, wake_up, an error code, a wait or retry reason, dead_letter)',
    ['outcome'],
  ),
  httpSeconds: histogram('executor_http_seconds', 'duration of calls to targets', ['outcome']),
  deadLetters: counter(
    'executor_dead_letters_total',
    'dead-letter records written to the DLQ topic beside their result, by reason (permanent, retries_exhausted, unprocessable)',
    ['reason'],
  ),
  expired: counter(
    'executor_expired_total',
    'requests ended by their start-by deadline (meta.deadline), with an expired result, by stage: queued (its turn came after it), retry (the pause before its next attempt would end after it), wait (a rate limit, breaker or other wait would)',
    ['stage'],
  ),
  debounced: counter(
    'executor_debounced_total',
    'requests ended without an attempt by a newer request of their debounce key (meta.debounce), with a debounced result',
  ),
  debounceUnavailable: counter(
    'executor_debounce_unavailable_total',
    'debounced tasks run without knowing whether a newer request replaced them: their key’s state in Redis unreadable (fail open)',
  ),
  leases: counter(
    'executor_leases_total',
    'tasks leased by the executor: divided by the tasks settled with a result, the leases a request costs (1 = never sent back to wait)',
  ),
  inFlight: gauge('executor_in_flight', 'tasks leased by this process and not yet settled'),
  parked: gauge(
    'executor_parked_tasks',
    'tasks parked in this process under their lease, holding no worker (EXECUTOR_PARKED_TASKS), by what they wait for: paced (a pacing slot), retry, breaker_busy, bulkhead (a slot of their origin)',
    ['reason'],
  ),
  parkedBytes: gauge(
    'executor_parked_bytes',
    'bytes of in records and queued tasks held by the tasks parked in this process (EXECUTOR_PARKED_BYTES)',
  ),
  originCalls: counter(
    'executor_origin_calls_total',
    `calls to targets by origin (at most ${MAX_ORIGIN_LABELS} origins per process, the rest "other") and outcome`,
    ['origin', 'outcome'],
  ),
  originSeconds: histogram(
    'executor_origin_call_seconds',
    `duration of calls to targets by origin (at most ${MAX_ORIGIN_LABELS} origins per process, the rest "other")`,
    ['origin'],
  ),
  destinationCalls: counter(
    'executor_destination_calls_total',
    `calls to targets made for a destination (meta.destination), by destination (at most ${MAX_DESTINATION_LABELS} per process, the rest "other") and outcome`,
    ['destination', 'outcome'],
  ),
  destinationSeconds: histogram(
    'executor_destination_call_seconds',
    `duration of calls made for a destination, by destination (at most ${MAX_DESTINATION_LABELS} per process, the rest "other")`,
    ['destination'],
  ),
  destinationBreakerState: gauge(
    'destination_breaker_state',
    'per destination, the state of the breaker its calls go through (its own, else its origin’s): 0 closed, 1 half-open, 2 open; sampled',
    ['destination'],
  ),
  destinationBreakerClientsOpen: gauge(
    'destination_breaker_clients_open',
    'per destination, the clients whose own breaker at its breaker is open or half-open (only their calls failed there); sampled',
    ['destination'],
  ),
  destinationPaused: gauge(
    'destination_paused',
    'per destination, 1 while a pause holds its calls (its own or its origin’s); sampled',
    ['destination'],
  ),
  destinationPacing: gauge(
    'destination_pacing',
    'per destination, 1 when its calls follow the origin’s pacing, 0 when it switched pacing off; sampled',
    ['destination'],
  ),
  destinationPaceRate: gauge(
    'destination_pace_rate',
    'per destination, the calls per second its origin’s pace permits it now (0: unpaced, or pacing off); sampled',
    ['destination'],
  ),
  destinationPaceLimit: gauge(
    'destination_pace_limit',
    'per destination, the calls in flight its origin’s pace learnt to permit (adaptive concurrency; 0: none learnt, or pacing off); sampled',
    ['destination'],
  ),
  destinationConcurrencyLimit: gauge(
    'destination_concurrency_limit',
    'per destination, its maxConcurrency: the most calls in flight across every executor (0: none); sampled',
    ['destination'],
  ),
  endToEndSeconds: histogram(
    'executor_end_to_end_seconds',
    'from the request accepted (createdAt) to its result written to out, by outcome class',
    ['outcome'],
    END_TO_END_BUCKETS,
  ),
};

/** Origins are user input: bounded (see BoundedLabel). */
export const originLabel = new BoundedLabel(MAX_ORIGIN_LABELS);

/** Destinations are named by operators, so few; still bounded, as a process's series live as long as it. */
export const destinationLabel = new BoundedLabel(MAX_DESTINATION_LABELS);

/** `2xx`…`5xx` for answers, the error code for failures. */
export function outcomeLabel(
  outcome: { kind: 'response'; status: number } | { kind: 'failure'; error: { code: string } },
) {
  return outcome.kind === 'response' ? `${Math.floor(outcome.status / 100)}xx` : outcome.error.code;
}
