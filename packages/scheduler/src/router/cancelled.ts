import type { Cancellations } from '@requester/shared/cancel';
import type { RequestContract } from '@requester/shared/contract';
import { RELAYED_FROM_HEADER } from '@requester/shared/journal';
import { headerText } from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import type { Outbox } from '@requester/shared/outbox';
import { type Route, routeRecord, type SourceRecord } from './route.ts';

export interface WakeOptions {
  cancellations: Pick<Cancellations, 'find'>;
  contract: RequestContract;
  inlineMaxBytes: number | undefined;
}

/**
 * A cancelled request (../../shared cancel) bound for the outbox is queued due now instead: the
 * executor that leases it answers it `cancelled` (the one writer of that result), now rather
 * than when it was due. This is also where a cancel's woken outbox rows end, come back through
 * the relay: such a row is due now, but a relayed record is queued for the later of its row's due
 * time and its `meta.scheduled` (see stagedDueAt), so one still due ahead is looked up too. A
 * Redis that does not answer is no cancel: the row is parked, and the executor asks again when it
 * is due. Returns the records taken out of the outbox path.
 */
export async function wakeCancelled(
  routes: Array<{ record: SourceRecord; route: Route }>,
  now: number,
  { cancellations, contract, inlineMaxBytes }: WakeOptions,
): Promise<ReadonlySet<SourceRecord>> {
  const woken = new Set<SourceRecord>();
  await Promise.all(
    routes.map(async (routed) => {
      const { route } = routed;
      const relayedAhead =
        route.kind === 'queue' &&
        route.task.dueAt > now &&
        headerText(routed.record.headers, RELAYED_FROM_HEADER) === 'outbox';
      if (route.kind !== 'outbox' && !relayedAhead) return;
      const { client, requestId } = route.envelope.meta;
      const createdAt = route.envelope.createdAt ? Date.parse(route.envelope.createdAt) : undefined;
      const cancelled = await cancellations.find(client, requestId, createdAt).catch(() => undefined);
      if (!cancelled) return;
      if (route.kind === 'queue') {
        routed.route = { ...route, task: { ...route.task, dueAt: now } };
        return;
      }
      const queued = routeRecord(routed.record, contract, {
        now,
        horizonMs: Number.POSITIVE_INFINITY,
        ...(inlineMaxBytes === undefined ? {} : { inlineMaxBytes }),
      });
      if (queued.kind !== 'queue') return;
      routed.route = { ...queued, task: { ...queued.task, dueAt: now } };
      woken.add(routed.record);
    }),
  );
  return woken;
}

/**
 * After the batch's rows are in the outbox: wakes those whose request was cancelled since
 * wakeCancelled looked. A cancel marks in Redis, then wakes the request's outbox rows; one that
 * came between that look and the write found no row to wake, and the row would sleep until it was
 * due (an hour, a month) before its `cancelled` result. The write comes before this second look,
 * the mark before the canceller's wake: one of the two sees the other. A look or a wake that fails
 * leaves the row to the executor, which asks when it is due.
 */
export async function wakeCancelledRows(
  routes: ReadonlyArray<{ route: Route }>,
  cancellations: Pick<Cancellations, 'find'>,
  outbox: Pick<Outbox, 'wake'>,
  logger: Logger,
): Promise<void> {
  await Promise.all(
    routes.map(async ({ route }) => {
      if (route.kind !== 'outbox') return;
      const { client, requestId } = route.envelope.meta;
      const createdAt = route.envelope.createdAt ? Date.parse(route.envelope.createdAt) : undefined;
      const cancelled = await cancellations.find(client, requestId, createdAt).catch(() => undefined);
      if (!cancelled) return;
      await outbox.wake(client, requestId).catch((err: unknown) => {
        logger.warn({ requestId, err: String(err) }, 'could not wake the outbox row of a cancelled request');
      });
    }),
  );
}
