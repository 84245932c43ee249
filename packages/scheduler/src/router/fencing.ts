import { isOrderedPartition } from '@requester/shared/contract';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import { queuePartition } from '@requester/shared/task';
import type { Fences } from './fence.ts';
import { type Fence, fenceRoute, type Route, type SourceRecord } from './route.ts';

const fenced = counter(
  'router_fenced_total',
  'records of ordered partitions the queue would have taken, sent to the outbox behind their partition fence',
);

/**
 * Folds the batch's records of ordered partitions through their partitions' fences (see
 * fenceRoute), in offset order, so that a record sees the fences set by the ones before it in the
 * batch; returns the fences that changed, for the caller to write once the rows are in the
 * outbox. One read for the batch, none for a batch without ordered partitions. A cancelled
 * request woken out of the outbox path (wakeCancelled) stays in the queue, answered `cancelled`
 * at once, and touches no fence. `relayed` says whether a record is a relay's copy (see Router).
 */
export async function fenceBatch(
  routes: Array<{ record: SourceRecord; route: Route }>,
  woken: ReadonlySet<SourceRecord>,
  fences: Fences,
  relayed: (record: SourceRecord) => boolean,
  logger: Logger,
): Promise<Map<string, Fence | undefined> | undefined> {
  const ordered = routes.filter(
    ({ record, route }) =>
      route.kind !== 'invalid' && isOrderedPartition(route.envelope.meta.partition) && !woken.has(record),
  );
  if (ordered.length === 0) return undefined;
  // The queue's partition id (client scope included), whether the record goes to the queue or not.
  const partitionOf = (route: Route) => {
    if (route.kind === 'invalid') return '';
    const { client, partition, requestId } = route.envelope.meta;
    return queuePartition(client, partition, requestId);
  };
  const read = await fences.read([...new Set(ordered.map(({ route }) => partitionOf(route)))]);
  const view = new Map<string, Fence | undefined>(read);
  for (const routed of ordered) {
    const partition = partitionOf(routed.route);
    try {
      const next = fenceRoute(routed.record, routed.route, view.get(partition), relayed(routed.record));
      if (routed.route.kind === 'queue' && next.route.kind === 'outbox') fenced.inc();
      routed.route = next.route;
      view.set(partition, next.fence);
    } catch (err) {
      // A bug on strange input must not fail the batch for ever: the record goes as routed.
      const { partition: kafkaPartition, offset } = routed.record;
      logger.error({ err, partition: kafkaPartition, offset }, 'fencing a record failed');
    }
  }
  const changed = new Map<string, Fence | undefined>();
  for (const [partition, fence] of view) {
    const before = read.get(partition);
    if (fence?.dueAt !== before?.dueAt || fence?.last !== before?.last) changed.set(partition, fence);
  }
  return changed;
}
