/**
 * The HTTP API shared by the ingress and sync-gateway roles:
 *
 * - `POST /request` (ingress): validate, stamp, write to `in`, answer `202 {requestId}`; with
 *   `meta.sync: true` and a Hub in this process, wait for the result and answer `200` + envelope.
 * - `GET /requests/:id?wait=30s` (sync-gateway): the result from the Hub, or `404 pending`.
 * - `DELETE /requests/:id` (ingress): cancels the caller's own request of that id (`202`).
 * - `GET /openapi.json`: the OpenAPI 3.1 document.
 *
 * One file per route in `routes/`, one folder per middleware; `problem.ts` and `reply.ts` are the
 * answers the routes share, `settings.ts` what the API is built from.
 *
 * Which roles run is read from `parts` on every request, so roles can attach to one server in any
 * order and a route of a role that does not run answers a 404 that says so.
 *
 * @module
 */

import type { Logger } from '@requester/shared/log';
import { Hono } from 'hono';
import { authenticate } from '../auth/index.ts';
import { openApiDocument } from '../openapi/index.ts';
import type { Env } from './context.ts';
import { log } from './log/index.ts';
import { observe } from './metrics/index.ts';
import { problem, refuse } from './problem.ts';
import { correlated } from './request-id/index.ts';
import { cancelOwn } from './routes/cancel.ts';
import { getEvents } from './routes/events.ts';
import { getResult } from './routes/result.ts';
import { submitRequest } from './routes/submit.ts';
import { type ApiParts, type ApiSettings, fairness } from './settings.ts';
import { traced } from './tracing/index.ts';

export { retryAfterSeconds } from './reply.ts';
export type { ApiParts, ApiSettings, Submit } from './settings.ts';

export function createApi(parts: ApiParts, settings: ApiSettings, logger: Logger): Hono<Env> {
  const app = new Hono<Env>();
  app.use(correlated());
  app.use(traced());
  app.use(observe(() => parts.closing === true, logger));
  const auth = authenticate<Env>(settings.access, refuse);
  app.use('/request', auth);
  app.use('/requests/*', auth);
  const fair = fairness(settings);
  app.post('/request', (c) => submitRequest(c, parts, settings, fair));
  app.get('/requests/:id', (c) => getResult(c, parts, settings, fair));
  app.get('/requests/:id/events', (c) => getEvents(c, parts, settings, fair));
  app.delete('/requests/:id', (c) => cancelOwn(c, parts, settings));
  app.get('/openapi.json', (c) => c.json(openApiDocument()));
  app.notFound((c) => problem(c, 404, 'not_found', `no route ${c.req.method} ${c.req.path}`));
  app.onError((err, c) => {
    log(c).error({ err }, 'unhandled error in the HTTP API');
    return problem(c, 500, 'internal', 'internal error');
  });
  return app;
}
