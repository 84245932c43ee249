import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { UsageError } from '@requester/shared';
import { type Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { type DlqSelection, originArg } from '../ops/index.ts';
import {
  breakerDetail,
  breakersPage,
  breakersTable,
  dlqPage,
  flash,
  limitersPage,
  loginPage,
  overviewLive,
  overviewPage,
  partitionsLive,
  partitionsPage,
  requestPage,
} from '../ui/pages.ts';
import { type AdminConsole, type Operator, SelectionError } from './console.ts';
import { adminOpenApiDocument } from './openapi.ts';

/**
 * The admin API (`/admin/api/…`, JSON; `/admin/openapi.json`) and the operator UI (`/ui`) of the
 * admin port. Both need an API key with an admin scope (`keys create --admin read|write`): as
 * `Authorization: Bearer` (the API), or the UI's login cookie (HttpOnly, SameSite=Strict). A read
 * key sees; acting (every POST) needs a write key, else 403.
 *
 * Cross-site requests: the cookie is SameSite=Strict (another site's page never sends it), and a
 * POST authenticated by the cookie must also carry `HX-Request` or a JSON content type (a plain
 * cross-site form can set neither without a CORS preflight, which this port never grants) and,
 * when the browser sends one, an Origin of this very host.
 */
export const ADMIN_COOKIE = 'requester_admin';

type Env = { Variables: { operator: Operator; viaCookie: boolean } };

const require = createRequire(import.meta.url);
const ASSETS: Record<string, { file: string; type: string }> = {
  'htmx.js': { file: require.resolve('htmx.org/dist/htmx.min.js'), type: 'text/javascript' },
  'uplot.js': { file: require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript' },
  'uplot.css': { file: require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css' },
  'app.js': { file: join(import.meta.dirname, '../ui/assets/app.js'), type: 'text/javascript' },
};
const assetCache = new Map<string, string>();

export function adminApp(console: AdminConsole): Hono<Env> {
  const app = new Hono<Env>();

  app.get('/ui/assets/:name', (c) => {
    const asset = ASSETS[c.req.param('name')];
    if (!asset) return c.notFound();
    let body = assetCache.get(asset.file);
    if (body === undefined) {
      body = readFileSync(asset.file, 'utf8');
      assetCache.set(asset.file, body);
    }
    return c.body(body, 200, { 'content-type': asset.type, 'cache-control': 'max-age=300' });
  });
  app.get('/ui/login', (c) => c.html(loginPage()));
  app.post('/ui/login', async (c) => {
    if (!sameOrigin(c)) return c.text('cross-site login refused', 403);
    const form = await c.req.parseBody();
    const token = typeof form.token === 'string' ? form.token.trim() : '';
    const operator = await console.identify(token).catch(() => undefined);
    if (!operator) return c.html(loginPage('Not an API key with an admin scope (or revoked).'), 401);
    setCookie(c, ADMIN_COOKIE, token, { httpOnly: true, sameSite: 'Strict', path: '/', maxAge: 12 * 3600 });
    return c.redirect('/ui/overview', 303);
  });
  app.post('/ui/logout', (c) => {
    deleteCookie(c, ADMIN_COOKIE, { path: '/' });
    return c.redirect('/ui/login', 303);
  });
  app.get('/admin/openapi.json', (c) => c.json(adminOpenApiDocument()));

  app.use('/ui/*', authenticate(console, 'ui'));
  app.use('/ui', authenticate(console, 'ui'));
  app.use('/admin/api/*', authenticate(console, 'api'));

  registerPages(app, console);
  registerApi(app, console);
  app.onError((err, c) => {
    const status = err instanceof UsageError || err instanceof SelectionError ? 400 : 503;
    const detail = err instanceof Error ? err.message : String(err);
    if (c.req.header('hx-request')) return c.html(flash(detail, true), 200);
    return c.json({ error: status === 400 ? 'invalid_request' : 'dependency_unavailable', detail }, status);
  });
  return app;
}

function sameOrigin(c: Context): boolean {
  const origin = c.req.header('origin');
  if (!origin || origin === 'null') return origin === undefined;
  try {
    return new URL(origin).host === c.req.header('host');
  } catch {
    return false;
  }
}

function authenticate(console: AdminConsole, kind: 'ui' | 'api') {
  return async (c: Context<Env>, next: () => Promise<void>) => {
    const bearer = /^Bearer +(\S+) *$/i.exec(c.req.header('authorization') ?? '')?.[1];
    const cookie = bearer ? undefined : getCookie(c, ADMIN_COOKIE);
    const operator = await console.identify(bearer ?? cookie);
    if (!operator) {
      if (kind === 'ui') return c.redirect('/ui/login', 303);
      c.header('WWW-Authenticate', 'Bearer realm="requester-admin"');
      return c.json({ error: 'unauthorized', detail: 'an API key with an admin scope is required' }, 401);
    }
    if (c.req.method === 'POST') {
      if (operator.admin !== 'write')
        return c.json({ error: 'forbidden', detail: 'this API key may read the admin API, not act' }, 403);
      const json = (c.req.header('content-type') ?? '').startsWith('application/json');
      if (cookie && (!sameOrigin(c) || !(c.req.header('hx-request') || json)))
        return c.json({ error: 'forbidden', detail: 'cross-site request refused' }, 403);
    }
    c.set('operator', operator);
    c.set('viaCookie', cookie !== undefined);
    await next();
  };
}

function registerPages(app: Hono<Env>, console: AdminConsole): void {
  app.get('/ui', (c) => c.redirect('/ui/overview', 303));
  app.get('/ui/overview', (c) => c.html(overviewPage(c.get('operator'))));
  app.get('/ui/overview/live', async (c) => c.html(overviewLive(await console.overview())));
  app.get('/ui/overview/series', (c) => c.json(columns(console)));
  app.get('/ui/partitions', (c) => c.html(partitionsPage(c.get('operator'))));
  app.get('/ui/partitions/live', async (c) => c.html(partitionsLive(await console.partitions(10))));
  app.get('/ui/requests', async (c) => {
    const id = c.req.query('id')?.trim() ?? '';
    const client = clientOf(c.req.query('client'));
    const data = id ? await console.request(id, client) : undefined;
    return c.html(requestPage(c.get('operator'), id, client ?? '', data));
  });
  app.get('/ui/dlq', async (c) => {
    const selection = selectionOf(c.req.query());
    const data = await console
      .deadLetters(selection, limitOf(c.req.query('limit'), 100))
      .catch((err: unknown) => ({ error: err instanceof Error ? err.message : String(err) }));
    return c.html(dlqPage(c.get('operator'), c.req.query(), data));
  });
  app.get('/ui/breakers', (c) => c.html(breakersPage(c.get('operator'))));
  app.get('/ui/breakers/live', async (c) =>
    c.html(breakersTable(c.get('operator'), await console.breakers())),
  );
  app.get('/ui/breakers/show', async (c) => {
    const origin = originQuery(c.req.query('origin'));
    return c.html(breakerDetail(c.get('operator'), await console.breaker1(origin)));
  });
  app.get('/ui/limiters', async (c) => {
    const query = limiterQuery(c.req.query());
    const views = query.key
      ? await console
          .limiter(query.key, query.rates, query.apiKey, query.client)
          .then((r) => r.views)
          .catch((err: unknown) => ({ error: err instanceof Error ? err.message : String(err) }))
      : undefined;
    return c.html(limitersPage(c.get('operator'), query, views));
  });
}

function registerApi(app: Hono<Env>, console: AdminConsole): void {
  app.get('/admin/api/whoami', (c) => c.json(c.get('operator')));
  app.get('/admin/api/overview', async (c) => c.json(await console.overview()));
  app.get('/admin/api/partitions', async (c) =>
    c.json(await console.partitions(limitOf(c.req.query('limit'), 20))),
  );
  app.get('/admin/api/requests/:id', async (c) =>
    c.json(await console.request(c.req.param('id'), clientOf(c.req.query('client')))),
  );
  app.get('/admin/api/requests/:id/events', async (c) => c.json(await console.events(c.req.param('id'))));
  app.get('/admin/api/dlq', async (c) =>
    c.json(await console.deadLetters(selectionOf(c.req.query()), limitOf(c.req.query('limit'), 50))),
  );
  app.post('/admin/api/dlq/replay', async (c) => {
    const body = await bodyOf(c);
    const selection = selectionOf(body);
    // The UI's checkboxes name DLQ positions: their requests are replayed (each one's latest).
    const refs = list(body.refs);
    if (refs.length)
      selection.requestIds = [...(selection.requestIds ?? []), ...(await requestIdsOf(console, refs))];
    const summary = await console.replay(c.get('operator'), {
      ...selection,
      force: body.force === true || body.force === 'true',
    });
    return answer(
      c,
      summary,
      `Replayed ${summary.replayed.length} to in (${summary.skipped.alreadyReplayed} replayed before).`,
    );
  });
  app.post('/admin/api/dlq/delete', async (c) => {
    const refs = list((await bodyOf(c)).refs);
    if (refs.length === 0)
      throw new SelectionError('delete needs refs: the DLQ positions topic/partition/offset');
    const result = await console.deleteDeadLetters(c.get('operator'), refs);
    return answer(c, result, `Marked ${result.marked} dead letters as handled.`);
  });
  app.get('/admin/api/breakers', async (c) =>
    c.json(await console.breakers(limitOf(c.req.query('limit'), 1_000))),
  );
  app.get('/admin/api/breakers/show', async (c) =>
    c.json(await console.breaker1(originQuery(c.req.query('origin')))),
  );
  app.post('/admin/api/breakers/reset', async (c) => {
    const origin = originQuery(stringOf((await bodyOf(c)).origin));
    const result = await console.resetBreaker(c.get('operator'), origin);
    return answer(
      c,
      result,
      result.reset ? `Closed the breaker of ${origin}.` : `${origin} was closed already.`,
    );
  });
  app.get('/admin/api/limiters', async (c) => {
    const query = limiterQuery(c.req.query());
    if (!query.key) throw new UsageError('key is required');
    return c.json((await console.limiter(query.key, query.rates, query.apiKey, query.client)).views);
  });
}

/** JSON for the API; for htmx a flash message, and a `refresh` event the live parts listen to. */
function answer(c: Context<Env>, value: unknown, message: string): Response {
  if (!c.req.header('hx-request')) return c.json(value);
  c.header('HX-Trigger', 'refresh');
  return c.html(flash(message)) as unknown as Response;
}

type Body = Record<string, unknown>;

async function bodyOf(c: Context<Env>): Promise<Body> {
  if ((c.req.header('content-type') ?? '').startsWith('application/json'))
    return ((await c.req.json().catch(() => ({}))) ?? {}) as Body;
  return (await c.req.parseBody({ all: true })) as Body;
}

function list(value: unknown): string[] {
  if (value === undefined || value === null || value === '') return [];
  return (Array.isArray(value) ? value : [value]).map(String).filter(Boolean);
}

function stringOf(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function selectionOf(query: Body): DlqSelection {
  const selection: DlqSelection = {};
  const ids = list(query.requestIds ?? query.requestId);
  if (ids.length) selection.requestIds = ids;
  for (const key of ['since', 'until', 'origin', 'errorCode', 'client'] as const) {
    const value = stringOf(query[key])?.trim();
    if (value) selection[key] = value;
  }
  return selection;
}

async function requestIdsOf(console: AdminConsole, refs: string[]): Promise<string[]> {
  const wanted = new Set(refs);
  const { entries } = await console.deadLetters({}, Number.MAX_SAFE_INTEGER);
  return entries.flatMap((e) => (wanted.has(e.ref) && e.requestId ? [e.requestId] : []));
}

function limitOf(text: string | undefined, fallback: number): number {
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new UsageError(`limit must be 1…10000, got ${text}`);
  return n;
}

function originQuery(text: string | undefined): string {
  return originArg(text, 'show and reset');
}

/** `?client=`: whose requestId (requestIds are per client); blank = a request without a client. */
function clientOf(text: string | undefined): string | undefined {
  return text?.trim() || undefined;
}

function limiterQuery(query: Record<string, string>): {
  key: string;
  rates: string[];
  apiKey: boolean;
  client: string | undefined;
} {
  return {
    key: (query.key ?? '').trim(),
    client: clientOf(query.client),
    rates: (query.rate ?? '')
      .split(',')
      .map((r) => r.trim())
      .filter(Boolean),
    apiKey: query.apiKey === '1' || query.apiKey === 'true',
  };
}

/** The chart's data, uPlot's column layout. */
function columns(console: AdminConsole) {
  console.live.start();
  const samples = console.live.samples();
  return {
    t: samples.map((s) => s.t),
    settledPerS: samples.map((s) => s.settledPerS),
    httpPerS: samples.map((s) => s.httpPerS),
    latencyMeanMs: samples.map((s) => s.latencyMeanMs),
  };
}
