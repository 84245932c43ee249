import { counter, gauge, histogram } from '@requester/shared';

/** The executor's metrics (one registry per process, see @requester/shared metrics). */
export const executorMetrics = {
  tasks: counter(
    'executor_tasks_total',
    'tasks settled by the executor, by outcome (status class, wake_up, an error code, retry, dead_letter)',
    ['outcome'],
  ),
  httpSeconds: histogram('executor_http_seconds', 'duration of calls to targets', ['outcome']),
  inFlight: gauge('executor_in_flight', 'tasks leased by this process and not yet settled'),
};

/** `2xx`…`5xx` for answers, the error code for failures. */
export function outcomeLabel(
  outcome: { kind: 'response'; status: number } | { kind: 'failure'; error: { code: string } },
) {
  return outcome.kind === 'response' ? `${Math.floor(outcome.status / 100)}xx` : outcome.error.code;
}
