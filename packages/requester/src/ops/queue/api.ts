import type { AdminConsole } from '../../admin-server/console.ts';
import { limitOf, revealTo } from '../../admin-server/http.ts';
import { mayReveal, type Operator } from '../../admin-server/operator.ts';
import type { ApiFace } from '../faces.ts';
import { partitionsOverview } from './index.ts';

/** `revealTo`: the operator who asked to see the requests' secrets (recorded as their action). */
export async function partitions(console: AdminConsole, limit: number, revealTo?: Operator) {
  const reveal = mayReveal(revealTo);
  const view = await partitionsOverview(console.queueAdmin(), limit, {
    breaker: console.breaker(),
    inRecords: console.inReader(),
    reveal,
  });
  if (revealTo)
    await console.reveal(
      revealTo,
      'partitions',
      [...view.heaviest, ...view.held].map((row) => row.requestId),
    );
  return view;
}

export const api: ApiFace = {
  paths: {
    '/admin/api/partitions': {
      get: {
        summary: 'The heaviest and the most held-back partitions, with their head task and why it waits',
        params: ['limit'],
        reveal: true,
      },
      post: undefined,
    },
  },
  routes(app, console) {
    app.get('/admin/api/partitions', async (c) =>
      c.json(await partitions(console, limitOf(c.req.query('limit'), 20), revealTo(c))),
    );
  },
};
