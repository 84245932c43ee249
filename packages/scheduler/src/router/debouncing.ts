import type { Debounces } from '@requester/shared/debounce';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import { acceptedAt, debounceRoute, entersDebounce, type Route, type SourceRecord } from './route.ts';

const entered = counter(
  'router_debounced_total',
  'requests with meta.debounce put off to the end of their burst, by whether they replaced an earlier one of the key (replaced) or started a burst (first)',
  ['burst'],
);
const unavailable = counter(
  'router_debounce_unavailable_total',
  'requests with meta.debounce routed as if without it, their key’s state in Redis unreadable (fail open: executed)',
);

/**
 * Enters the batch's debounced records into their keys' bursts (see Debounces.enter): the one of
 * a key that arrived last is its latest (the last in offset order, of records of one partition of
 * `in` with one arrival). Each gets its burst's due time (debounceRoute). Returns the records put off, with their
 * due time, for the journal. Redis unreadable: the records go as routed, due now, and are executed
 * (a debounce is a saving, a request a promise); so does a record whose entry failed.
 */
export async function debounceBatch(
  routes: Array<{ record: SourceRecord; route: Route }>,
  debounces: Debounces,
  now: number,
  horizonMs: number,
  relayed: (record: SourceRecord) => boolean,
  logger: Logger,
): Promise<Map<SourceRecord, number>> {
  const held = new Map<SourceRecord, number>();
  const debounced = routes.filter(({ record, route }) => entersDebounce(route, relayed(record)));
  if (debounced.length === 0) return held;
  const answers = await Promise.allSettled(
    debounced.map(async ({ record, route }) => {
      if (route.kind !== 'queue' || !route.envelope.meta.debounce) throw new Error('not debounced');
      const { client, requestId, debounce } = route.envelope.meta;
      return debounces.enter(client, requestId, debounce, now, {
        arrivedAt: acceptedAt(record, route.envelope, now),
        partition: record.partition,
        offset: record.offset,
      });
    }),
  );
  debounced.forEach((routed, i) => {
    const answer = answers[i];
    const { route, record } = routed;
    if (route.kind !== 'queue') return;
    if (answer?.status !== 'fulfilled') {
      unavailable.inc();
      logger.warn(
        { err: answer?.reason, partition: record.partition, offset: record.offset },
        'debounce state not readable: the request runs as if without meta.debounce',
      );
      return;
    }
    routed.route = debounceRoute(record, route, answer.value.dueAt, { now, horizonMs });
    entered.inc({ burst: answer.value.replaced === '' ? 'first' : 'replaced' });
    held.set(record, answer.value.dueAt);
  });
  return held;
}
