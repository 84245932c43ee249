import { answer, bodyOf, stringOf } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { cancelSummary } from './index.ts';

/**
 * `POST /admin/api/requests/{id}/cancel` (body `{client}`; a write key, as every POST of the
 * admin API): the operator cancel of ./index.ts, recorded by it (`request.cancel`). JSON for the
 * API; a flash message for the request page's button (htmx, ./ui.ts).
 */
export const api: ApiFace = {
  paths: {
    '/admin/api/requests/{id}/cancel': {
      get: undefined,
      post: {
        summary:
          'Cancel a request of a client (requester cancel): its one result on out is cancelled (499, meta.cancelled {by, at}); no attempt starts after it, wherever it waits; an attempt in flight finishes. Answers {requestId, client, by, at, first, outboxWoken}; asking again answers the first cancel (first: false). Journaled as request.cancel.',
        write: true,
        pathId: true,
        body: { client: { type: 'string', description: 'whose request: the API key name; omit for none' } },
      },
    },
  },
  routes(app, console) {
    app.post('/admin/api/requests/:id/cancel', async (c) => {
      const client = stringOf((await bodyOf(c)).client)?.trim() || undefined;
      const outcome = await console.cancel(c.get('operator'), client, c.req.param('id'));
      return answer(c, outcome, cancelSummary(outcome));
    });
  },
};
