import {
  eventsOfClient,
  isDestinationSubject,
  type JournalEvent,
  lookupSince,
} from '@requester/shared/journal';
import type { Context } from 'hono';
import type { Env } from '../context.ts';
import { log, useLog } from '../log/index.ts';
import { notServed, overShare, problem, unavailable } from '../problem.ts';
import { callerClient } from '../reply.ts';
import type { ApiParts, ApiSettings, Fairness } from '../settings.ts';

/**
 * The journal of one request (`?since=` as `requester trace --since`): the events of the caller's
 * own request of that id (the client namespace). Another key's request of the same id is not
 * told; with none of its own the caller gets 404, as for an unknown requestId.
 */
export async function getEvents(
  c: Context<Env>,
  parts: ApiParts,
  settings: ApiSettings,
  fair: Fairness,
): Promise<Response> {
  const read = parts.readJournal;
  if (!read) return notServed(c, 'GET /requests/{id}/events', 'sync-gateway');
  const id = c.req.param('id') ?? '';
  useLog(c, parts.gatewayLog, id);
  // A destination's journal is the operators' (admin API), not a caller's, even without API keys.
  if (isDestinationSubject(id))
    return problem(c, 404, 'not_found', `no journal events for request ${JSON.stringify(id)}`);
  const since = c.req.query('since');
  const sinceMs = since === undefined || since === '' ? undefined : lookupSince(since);
  if (typeof sinceMs === 'string')
    return problem(c, 400, 'invalid_request', `since: ${sinceMs}`, [{ path: 'since', message: sinceMs }]);
  const slot = fair.lookups.enter(c.get('caller')?.keyId);
  if (!slot)
    return overShare(
      c,
      `this API key already runs ${fair.lookups.max} journal lookups on this sync-gateway (EVENTS_MAX_LOOKUPS_PER_KEY); retry later`,
    );
  let events: JournalEvent[];
  try {
    events = await read({ requestId: id, ...(sinceMs === undefined ? {} : { sinceMs }) });
  } catch (err) {
    log(c).warn({ err }, 'the task journal could not be read');
    return unavailable(c, settings, 'the task journal could not be read; retry later');
  } finally {
    slot.leave();
  }
  const client = callerClient(c);
  const own = eventsOfClient(events, client);
  if (own.length === 0 || !settings.access.mayReadClient(c.get('caller'), client))
    return problem(c, 404, 'not_found', `no journal events for request ${JSON.stringify(id)}`);
  return c.json({ requestId: id, events: own }, 200);
}
