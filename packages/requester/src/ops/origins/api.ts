import { limitOf } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { listOrigins, originQuery, showOrigin } from './index.ts';

/** `GET /admin/api/origins` and `/admin/api/origins/show?origin=` (read key): ./index.ts. */
export const api: ApiFace = {
  paths: {
    '/admin/api/origins': {
      get: {
        summary:
          'Target origins across the deployment: breaker, calls in flight and cap, pace and learnt concurrency limit, pause, and calls of the last 15 minutes (attempts, success rate, p50/p95 ms) (requester origins list)',
        params: ['limit'],
      },
      post: undefined,
    },
    '/admin/api/origins/show': {
      get: { summary: 'One target origin (requester origins show)', params: ['origin'] },
      post: undefined,
    },
  },
  routes(app, console) {
    app.get('/admin/api/origins', async (c) =>
      c.json(await listOrigins(console.originParts(), limitOf(c.req.query('limit'), 200))),
    );
    app.get('/admin/api/origins/show', async (c) =>
      c.json(await showOrigin(console.originParts(), originQuery(c.req.query('origin')))),
    );
  },
};
