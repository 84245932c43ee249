import { answer, bodyOf, limitOf, stringOf } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { breakerKeyArg, listBreakers, resetBreaker, showBreaker } from './index.ts';

/**
 * An origin (or a destination's own breaker) of a query or body: the admin API and the UI name
 * the action `show and reset`.
 */
export function originQuery(text: string | undefined): string {
  return breakerKeyArg(text, 'show and reset');
}

export const api: ApiFace = {
  paths: {
    '/admin/api/breakers': {
      get: { summary: 'Open and half-open breakers (requester breakers list)', params: ['limit'] },
      post: undefined,
    },
    '/admin/api/breakers/show': {
      get: { summary: 'The breaker of one origin (requester breakers show)', params: ['origin'] },
      post: undefined,
    },
    '/admin/api/breakers/reset': {
      get: undefined,
      post: {
        summary: 'Close the breaker of an origin (requester breakers reset)',
        write: true,
        body: { origin: { type: 'string' } },
      },
    },
  },
  routes(app, console) {
    app.get('/admin/api/breakers', async (c) =>
      c.json(await listBreakers(console.breaker(), limitOf(c.req.query('limit'), 1_000))),
    );
    app.get('/admin/api/breakers/show', async (c) =>
      c.json(await showBreaker(console.breaker(), originQuery(c.req.query('origin')))),
    );
    app.post('/admin/api/breakers/reset', async (c) => {
      const origin = originQuery(stringOf((await bodyOf(c)).origin));
      const result = await resetBreaker(console.breaker(), origin);
      const held = result.held ? { held: result.held } : {};
      await console.record(c.get('operator'), 'breaker.reset', { origin, ...held });
      const hold = result.held ? ` and ended its hold (${result.held})` : '';
      return answer(
        c,
        result,
        result.reset ? `Closed the breaker of ${origin}${hold}.` : `${origin} was closed already.`,
      );
    });
  },
};
