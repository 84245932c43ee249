import {
  Cancellations,
  type CancelOutcome,
  type Config,
  cancelRequest,
  type Journal,
  type Logger,
  Outbox,
  type RedisClient,
  type Sql,
  UsageError,
} from '@requester/shared';
import { type AdminActionEvent, recordAdminAction } from '../audit.ts';

/**
 * Operator cancel by id (issue 22): the operation behind `requester cancel`, the admin API's
 * `POST /admin/api/requests/{id}/cancel` and the request page's Cancel button. The same cancel as
 * a client's `DELETE /requests/{id}` (@requester/shared cancelRequest: a mark in Redis, the
 * request's outbox rows woken, one `cancelled` result written by the hop that holds the request),
 * done on a client's behalf and recorded as an operator action (`request.cancel`, with the actor)
 * in the log, the admin_actions_total metric and the request's journal.
 */
export interface CancelParts {
  redis: RedisClient;
  sql: () => Promise<Sql>;
  config: Pick<Config, 'redisPrefix' | 'cancelRetention'>;
  logger: Logger;
  /** The task journal (a `cancelled` step); absent = none. */
  journal?: Journal;
  /** The journal hook of operator actions (see recordAdminAction). */
  journalAdminAction?: (event: AdminActionEvent) => Promise<void>;
}

/** `client`: whose requestId (requestIds are per client); none = a request without `meta.client`. */
export async function cancelById(
  parts: CancelParts,
  actor: string,
  client: string | undefined,
  requestId: string,
): Promise<CancelOutcome> {
  const id = requestId.trim();
  if (!/^[\x21-\x7e]{1,256}$/.test(id))
    throw new UsageError(`not a requestId: ${JSON.stringify(requestId)} (1 to 256 printable characters)`);
  const { redis, config } = parts;
  const outcome = await cancelRequest(
    {
      cancellations: new Cancellations(redis, config.redisPrefix, config.cancelRetention),
      outbox: async () => new Outbox(await parts.sql()),
      ...(parts.journal ? { journal: parts.journal } : {}),
    },
    client,
    id,
    actor,
  );
  await recordAdminAction(
    parts.logger,
    {
      action: 'request.cancel',
      actor,
      target: { requestIds: [id], client: client ?? null, first: outcome.first },
      outcome: 'done',
    },
    parts.journalAdminAction,
  );
  return outcome;
}

/** One line for people: what was recorded, and what follows. */
export function cancelSummary(outcome: CancelOutcome): string {
  const whose = outcome.client === null ? '' : ` of ${outcome.client}`;
  const head = outcome.first
    ? `cancelled ${outcome.requestId}${whose}`
    : `${outcome.requestId}${whose} was cancelled already, by ${outcome.by} at ${outcome.at}`;
  return `${head}: its one result (cancelled, 499) follows on out from the hop that holds it; an attempt in flight finishes, no other starts`;
}
