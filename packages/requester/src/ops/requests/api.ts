import { clientOf, revealTo } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { lookupRequest, requestEvents } from './index.ts';

export const api: ApiFace = {
  paths: {
    '/admin/api/requests/{id}': {
      get: {
        summary:
          "A request's result (if this process's sync-gateway holds it) and its dead letters; requestIds are per client: `client` names whose (none: a request without meta.client; dead letters of every client)",
        pathId: true,
        params: ['client'],
        reveal: true,
      },
      post: undefined,
    },
    '/admin/api/requests/{id}/events': {
      get: {
        summary: "A request's journal timeline; {enabled: false} when no journal is wired",
        pathId: true,
      },
      post: undefined,
    },
  },
  routes(app, console) {
    app.get('/admin/api/requests/:id', async (c) =>
      c.json(await lookupRequest(console, c.req.param('id'), clientOf(c.req.query('client')), revealTo(c))),
    );
    app.get('/admin/api/requests/:id/events', async (c) =>
      c.json(await requestEvents(console, c.req.param('id'))),
    );
  },
};
