import type { CancelOutcome } from '@requester/shared';
import type { Context } from 'hono';
import type { Operator } from '../../admin-server/console.ts';
import { flash } from '../../ui/pages.ts';
import { cancelSummary } from './index.ts';

/**
 * `POST /admin/api/requests/{id}/cancel` (body `{client}`; a write key, as every POST of the
 * admin API): the operator cancel of ./index.ts. JSON for the API; a flash message for the UI's
 * button (htmx).
 */
export async function cancelFromApi(
  c: Context,
  operator: Operator,
  act: (operator: Operator, client: string | undefined, requestId: string) => Promise<CancelOutcome>,
): Promise<Response> {
  const body = (c.req.header('content-type') ?? '').startsWith('application/json')
    ? (((await c.req.json().catch(() => ({}))) ?? {}) as Record<string, unknown>)
    : ((await c.req.parseBody()) as Record<string, unknown>);
  const client = typeof body.client === 'string' && body.client.trim() ? body.client.trim() : undefined;
  const outcome = await act(operator, client, c.req.param('id') ?? '');
  if (!c.req.header('hx-request')) return c.json(outcome);
  return c.html(flash(cancelSummary(outcome))) as unknown as Response;
}

/** Its entry in the admin API's OpenAPI document (../../admin-server/openapi.ts). */
export const CANCEL_OPERATION = {
  summary:
    'Cancel a request of a client (requester cancel): its one result on out is cancelled (499, meta.cancelled {by, at}); no attempt starts after it, wherever it waits; an attempt in flight finishes. Answers {requestId, client, by, at, first, outboxWoken}; asking again answers the first cancel (first: false). Journaled as request.cancel.',
  write: true,
  pathId: true,
  body: { client: { type: 'string', description: 'whose request: the API key name; omit for none' } },
};
