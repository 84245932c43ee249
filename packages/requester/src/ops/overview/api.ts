import type { ApiFace } from '../faces.ts';
import { overview } from './index.ts';

export const api: ApiFace = {
  paths: {
    '/admin/api/overview': {
      get: {
        summary: 'Queue depth per shard, partitions by state, in flight, outbox, breakers, live throughput',
      },
      post: undefined,
    },
  },
  routes(app, console) {
    app.get('/admin/api/overview', async (c) => c.json(await overview(console)));
  },
};
