import type { ApiFace } from '../faces.ts';
import { topArg, topClients } from './index.ts';

/** `GET /admin/api/clients?top=50` (read key): ./index.ts. */
export const api: ApiFace = {
  paths: {
    '/admin/api/clients': {
      get: {
        summary:
          'Clients by backlog, largest first: backlog, ready partitions, in flight (when counted), weight, cap and rate of its key, how long its next task has waited (queue info --by-client, with the key)',
        params: ['top'],
      },
      post: undefined,
    },
  },
  routes(app, console) {
    app.get('/admin/api/clients', async (c) =>
      c.json(
        await topClients(console.queueAdmin(), (await console.keysParts()).store, topArg(c.req.query('top'))),
      ),
    );
  },
};
