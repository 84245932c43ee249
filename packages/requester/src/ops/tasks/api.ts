import { type AdminContext, answer, bodyOf, stringOf } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { type ScheduledFilter, scheduledPage } from './index.ts';

/** The filter and page of `?client=&dueAfter=&dueBefore=&limit=&cursor=`. */
export function scheduledQuery(c: AdminContext): {
  filter: ScheduledFilter;
  limit: number;
  cursor?: string;
} {
  const q = c.req.query();
  const filter: ScheduledFilter = {};
  if (q.client !== undefined) filter.client = q.client.trim();
  if (q.dueAfter?.trim()) filter.dueAfter = q.dueAfter.trim();
  if (q.dueBefore?.trim()) filter.dueBefore = q.dueBefore.trim();
  const limit = q.limit ? Number(q.limit) : 50;
  return { filter, limit, ...(q.cursor ? { cursor: q.cursor } : {}) };
}

/**
 * `GET /admin/api/tasks/scheduled` (read key): one page of the outbox.
 * `POST /admin/api/tasks/scheduled/cancel` `{client?, dueAfter?, dueBefore?, confirm?}` (write
 * key): without `confirm: true` the preview `{matched}`, with it the cancel of every match,
 * recorded by ./index.ts (`tasks.cancel`).
 */
export const api: ApiFace = {
  paths: {
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
  },
  routes(app, console) {
    app.get('/admin/api/tasks/scheduled', async (c) => {
      const { filter, limit, cursor } = scheduledQuery(c);
      return c.json(await scheduledPage(await console.sql(), filter, limit, cursor));
    });
    app.post('/admin/api/tasks/scheduled/cancel', async (c) => {
      const body = await bodyOf(c);
      const filter: ScheduledFilter = {};
      const client = stringOf(body.client);
      if (client !== undefined) filter.client = client.trim();
      const dueAfter = stringOf(body.dueAfter)?.trim();
      if (dueAfter) filter.dueAfter = dueAfter;
      const dueBefore = stringOf(body.dueBefore)?.trim();
      if (dueBefore) filter.dueBefore = dueBefore;
      const confirm = body.confirm === true || body.confirm === 'true';
      const outcome = await console.cancelScheduled(c.get('operator'), filter, confirm);
      return answer(
        c,
        outcome,
        outcome.preview
          ? `${outcome.matched} scheduled requests match.`
          : `Cancelled ${outcome.cancelled} scheduled requests: their results (cancelled) follow on out.`,
      );
    });
  },
};
