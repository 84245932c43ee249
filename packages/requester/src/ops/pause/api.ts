import { answer, type Body, bodyOf, stringOf } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { type PauseTarget, untilArg } from './index.ts';

const SCOPE = { type: 'string', enum: ['origin', 'client', 'partition', 'destination'] };

/**
 * `GET /admin/api/pauses` (read key), `POST /admin/api/pauses` `{scope, value, client?, until?}`
 * and `POST /admin/api/pauses/resume` `{scope, value, client?}` (write key): the operations of
 * ./index.ts, each recorded by it (`pause`, `resume`).
 */
export const api: ApiFace = {
  paths: {
    '/admin/api/pauses': {
      get: { summary: 'The pauses in force: scope, value, by, since, until (requester pauses)' },
      post: {
        summary:
          'Pause the work of an origin, a client or a partition (requester pause): every executor honours it from its next lease, a resume within a second; paused tasks stay queued in order, unattempted. until: RFC 3339 or a duration (2h); client: whose partition',
        write: true,
        body: {
          scope: SCOPE,
          value: { type: 'string' },
          client: { type: 'string' },
          until: { type: 'string' },
        },
      },
    },
    '/admin/api/pauses/resume': {
      get: undefined,
      post: {
        summary: 'Resume a paused origin, client or partition (requester resume)',
        write: true,
        body: { scope: SCOPE, value: { type: 'string' }, client: { type: 'string' } },
      },
    },
  },
  routes(app, console) {
    app.get('/admin/api/pauses', async (c) => c.json(await console.pauses()));
    app.post('/admin/api/pauses', async (c) => {
      const body = await bodyOf(c);
      const row = await console.pause(c.get('operator'), targetOf(body), untilArg(text(body.until)));
      return answer(
        c,
        row,
        `Paused ${row.scope} ${row.value}${row.until ? ` until ${row.until}` : ' until resumed'}.`,
      );
    });
    app.post('/admin/api/pauses/resume', async (c) => {
      const result = await console.resume(c.get('operator'), targetOf(await bodyOf(c)));
      return answer(
        c,
        result,
        result.resumed ? `Resumed ${result.scope} ${result.value}.` : `${result.value} was not paused.`,
      );
    });
  },
};

function text(value: unknown): string | undefined {
  return stringOf(value)?.trim() || undefined;
}

function targetOf(body: Body): PauseTarget {
  return { scope: text(body.scope) ?? '', value: text(body.value) ?? '', client: text(body.client) };
}
