import { ownerActor } from '@requester/shared/cancel';
import type { Context } from 'hono';
import type { Env } from '../context.ts';
import { log, useLog } from '../log/index.ts';
import { notServed, problem, unavailable } from '../problem.ts';
import { callerClient } from '../reply.ts';
import type { ApiParts, ApiSettings } from '../settings.ts';

/**
 * `DELETE /requests/{id}`: the caller's own request of that id is cancelled (requestIds are per
 * client, so another key's request of the same id is never touched, nor told of). Answered 202 at
 * once: the request's one result, `cancelled` (status 499), follows on `out` from the hop that
 * holds it; an attempt already in flight finishes, and no other starts. An id the caller never
 * sent (as far as `parts.known` tells: accepted within QUEUE_DEDUP_WINDOW, cancelled already, or in
 * the outbox) is answered 404 and nothing is recorded; another key's request of that id is looked
 * up under the caller's own namespace, so it is answered alike: 404, never a hint that it exists.
 */
export async function cancelOwn(c: Context<Env>, parts: ApiParts, settings: ApiSettings): Promise<Response> {
  if (!parts.cancel) return notServed(c, 'DELETE /requests/{id}', 'ingress');
  const id = c.req.param('id') ?? '';
  useLog(c, parts.ingressLog, id);
  if (!/^[\x21-\x7e]{1,256}$/.test(id))
    return problem(c, 400, 'invalid_request', 'the requestId must be 1 to 256 printable characters', [
      { path: 'id', message: 'not a requestId' },
    ]);
  const client = callerClient(c);
  try {
    if (parts.known && !(await parts.known(client, id)))
      return problem(c, 404, 'not_found', `no request ${JSON.stringify(id)} of this API key`);
    const outcome = await parts.cancel(client, id, ownerActor(client));
    log(c).info({ requestId: id, first: outcome.first, outboxWoken: outcome.outboxWoken }, 'cancel recorded');
    const { outboxWoken: _w, ...body } = outcome;
    return c.json(body, 202);
  } catch (err) {
    log(c).warn({ err }, 'the cancel could not be recorded; refused with 503');
    return unavailable(c, settings, 'the cancel could not be recorded; retry later');
  }
}
