import type { Sql } from '@requester/shared';
import type { Context } from 'hono';
import type { Operator } from '../../admin-server/console.ts';
import { flash } from '../../ui/pages.ts';
import { type ScheduledFilter, scheduledPage } from './index.ts';

/** The filter and page of `?client=&dueAfter=&dueBefore=&limit=&cursor=`. */
export function scheduledQuery(c: Context): { filter: ScheduledFilter; limit: number; cursor?: string } {
  const q = c.req.query();
  const filter: ScheduledFilter = {};
  if (q.client !== undefined) filter.client = q.client.trim();
  if (q.dueAfter?.trim()) filter.dueAfter = q.dueAfter.trim();
  if (q.dueBefore?.trim()) filter.dueBefore = q.dueBefore.trim();
  const limit = q.limit ? Number(q.limit) : 50;
  return { filter, limit, ...(q.cursor ? { cursor: q.cursor } : {}) };
}

/** `GET /admin/api/tasks/scheduled` (read key): one page of the outbox. */
export async function scheduledFromApi(c: Context, sql: () => Promise<Sql>): Promise<Response> {
  const { filter, limit, cursor } = scheduledQuery(c);
  return c.json(await scheduledPage(await sql(), filter, limit, cursor));
}

/**
 * `POST /admin/api/tasks/scheduled/cancel` `{client?, dueAfter?, dueBefore?, confirm?}` (write
 * key): without `confirm: true` the preview `{matched}`, with it the cancel of every match.
 */
export async function cancelScheduledFromApi(
  c: Context,
  operator: Operator,
  act: (
    operator: Operator,
    filter: ScheduledFilter,
    confirm: boolean,
  ) => Promise<{ matched: number; cancelled: number; preview: boolean }>,
): Promise<Response> {
  const raw = (c.req.header('content-type') ?? '').startsWith('application/json')
    ? (((await c.req.json().catch(() => ({}))) ?? {}) as Record<string, unknown>)
    : ((await c.req.parseBody()) as Record<string, unknown>);
  const filter: ScheduledFilter = {};
  if (typeof raw.client === 'string') filter.client = raw.client.trim();
  if (typeof raw.dueAfter === 'string' && raw.dueAfter.trim()) filter.dueAfter = raw.dueAfter.trim();
  if (typeof raw.dueBefore === 'string' && raw.dueBefore.trim()) filter.dueBefore = raw.dueBefore.trim();
  const outcome = await act(operator, filter, raw.confirm === true || raw.confirm === 'true');
  if (!c.req.header('hx-request')) return c.json(outcome);
  return c.html(
    flash(
      outcome.preview
        ? `${outcome.matched} scheduled requests match.`
        : `Cancelled ${outcome.cancelled} scheduled requests: their results (cancelled) follow on out.`,
    ),
  ) as unknown as Response;
}

/** Its entry in the admin API's OpenAPI document (../../admin-server/openapi.ts). */
export const TASKS_OPERATIONS = {
  '/admin/api/tasks/scheduled': {
    get: {
      summary:
        'Requests waiting in the outbox (scheduled beyond REDIS_HORIZON, long retry waits), soonest first, one page at a time: {rows, next}; pass next as cursor for the following page (requester tasks scheduled). client: the API key name, blank for none',
      params: ['client', 'dueAfter', 'dueBefore', 'limit', 'cursor'],
    },
    post: undefined,
  },
  '/admin/api/tasks/scheduled/cancel': {
    get: undefined,
    post: {
      summary:
        'Cancel every scheduled request a selection matches (client, dueAfter, dueBefore; one at least): without confirm: true, the preview {matched}; with it, {matched, cancelled}. Walks the selection by pages; resumable (run it again)',
      write: true,
      body: {
        client: { type: 'string' },
        dueAfter: { type: 'string' },
        dueBefore: { type: 'string' },
        confirm: { type: 'boolean' },
      },
    },
  },
};
