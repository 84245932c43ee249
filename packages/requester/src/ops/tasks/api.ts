import type { Sql } from '@requester/shared';
import type { Context } from 'hono';
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
};
