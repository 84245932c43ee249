import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { UsageError } from '@requester/shared';
import { type Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { secureHeaders } from 'hono/secure-headers';
import { cancelFromApi } from '../ops/cancel/api.ts';
import { type DlqSelection, originArg } from '../ops/index.ts';
import { pauseFromApi, resumeFromApi } from '../ops/pause/api.ts';
import { pausesBody, pausesTable } from '../ops/pause/ui.ts';
import { cancelScheduledFromApi, scheduledFromApi, scheduledQuery } from '../ops/tasks/api.ts';
import { scheduledPage } from '../ops/tasks/index.ts';
import { scheduledBody } from '../ops/tasks/ui.ts';
import {
  breakerDetail,
  breakersPage,
  breakersTable,
  dlqPage,
  flash,
  layout,
  limitersPage,
  loginPage,
  overviewLive,
  overviewPage,
  partitionsLive,
  partitionsPage,
  requestPage,
} from '../ui/pages.ts';
import { type AdminConsole, type Operator, ScopeError, SelectionError } from './console.ts';
import { adminOpenApiDocument } from './openapi.ts';

/**
 * The admin API (`/admin/api/…`, JSON; `/admin/openapi.json`) and the operator UI (`/ui`) of the
 * admin port. Both need an API key with an admin scope (`keys create --admin read|write`): as
 * `Authorization: Bearer` (the API), or the UI's session cookie, which logging in with such a key
 * opens (./sessions.ts: a random id, never the key). A read key sees; acting (every POST) and
 * revealing the secrets of requests (`?reveal=true`) need a write key, else 403.
 *
 * Cross-site requests: the cookie is HttpOnly and SameSite=Strict (another site's page never sends
 * it), Secure when the login came over https (ADMIN_TRUST_PROXY), and a POST authenticated by it
 * must also carry `HX-Request` or a JSON content type (a plain cross-site form can set neither
 * without a CORS preflight, which this port never grants) and, when the browser sends one, an
 * Origin of this very host. Every answer carries SECURITY_HEADERS: no framing, no inline script,
 * no referrer to other sites.
 */
export const ADMIN_COOKIE = 'requester_admin';

/**
 * The UI needs nothing inline: its scripts and styles are files of /ui/assets, htmx evaluates no
 * code (htmx-config in pages.ts), and uPlot styles through the CSSOM, which style-src allows.
 */
const SECURITY_HEADERS = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'none'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", 'data:'],
    connectSrc: ["'self'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
    baseUri: ["'none'"],
  },
  xFrameOptions: 'DENY',
  // Not no-referrer: under it a browser sends `Origin: null` with the page's own form posts,
  // which the login's same-origin check must refuse. Other sites get no referrer either way.
  referrerPolicy: 'same-origin',
  // HSTS would bind every port of the host name, not only this one: the operator's proxy decides.
  strictTransportSecurity: false,
});

type Env = { Variables: { operator: Operator; viaCookie: boolean } };

const require = createRequire(import.meta.url);
const ASSETS: Record<string, { file: string; type: string }> = {
  'htmx.js': { file: require.resolve('htmx.org/dist/htmx.min.js'), type: 'text/javascript' },
  'uplot.js': { file: require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript' },
  'uplot.css': { file: require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css' },
  'app.js': { file: join(import.meta.dirname, '../ui/assets/app.js'), type: 'text/javascript' },
  'ui.css': { file: join(import.meta.dirname, '../ui/assets/ui.css'), type: 'text/css' },
};
const assetCache = new Map<string, string>();

export function adminApp(console: AdminConsole): Hono<Env> {
  const app = new Hono<Env>();
  app.use('*', SECURITY_HEADERS);
  app.use('*', async (c, next) => {
    await next();
    // Views may hold what only an operator should see: no cache keeps a copy.
    if (!c.req.path.startsWith('/ui/assets/')) c.res.headers.set('Cache-Control', 'no-store');
  });

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
    const session = await console.sessions.open(token);
    setCookie(c, ADMIN_COOKIE, session, {
      httpOnly: true,
      sameSite: 'Strict',
      path: '/',
      secure: overHttps(c, console),
      maxAge: Math.floor(console.sessions.ttlMs / 1000),
    });
    return c.redirect('/ui/overview', 303);
  });
  app.post('/ui/logout', async (c) => {
    await console.sessions.close(getCookie(c, ADMIN_COOKIE));
    deleteCookie(c, ADMIN_COOKIE, { path: '/', secure: overHttps(c, console) });
    return c.redirect('/ui/login', 303);
  });
  app.get('/admin/openapi.json', (c) => c.json(adminOpenApiDocument()));

  app.use('/ui/*', authenticate(console, 'ui'));
  app.use('/ui', authenticate(console, 'ui'));
  app.use('/admin/api/*', authenticate(console, 'api'));

  registerPages(app, console);
  registerApi(app, console);
  app.onError((err, c) => {
    const status =
      err instanceof UsageError || err instanceof SelectionError
        ? 400
        : err instanceof ScopeError
          ? 403
          : 503;
    const detail = err instanceof Error ? err.message : String(err);
    if (c.req.header('hx-request')) return c.html(flash(detail, true), 200);
    const error = { 400: 'invalid_request', 403: 'forbidden', 503: 'dependency_unavailable' }[status];
    return c.json({ error, detail }, status);
  });
  return app;
}

/**
 * Whether the browser reached this port over https: through the TLS-terminating proxy that
 * ADMIN_TRUST_PROXY declares, whose X-Forwarded-Proto says so (the first value, the client's hop).
 * Without that setting the header is ignored: the admin port itself speaks plain HTTP.
 */
function overHttps(c: Context, console: AdminConsole): boolean {
  if (!console.config.adminTrustProxy) return false;
  const proto = c.req.header('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase();
  return proto === 'https';
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
    const operator = bearer ? await console.identify(bearer) : await console.sessions.operator(cookie);
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

/** The operator, when the query asks to reveal secrets (`reveal=true`); a read key gets 403. */
function revealTo(c: Context<Env>): Operator | undefined {
  const text = c.req.query('reveal');
  if (text === undefined || text === '' || text === 'false' || text === '0') return undefined;
  if (text !== 'true' && text !== '1') throw new UsageError(`reveal must be true or false, got ${text}`);
  return c.get('operator');
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
    const reveal = revealTo(c);
    const data = id ? await console.request(id, client, reveal) : undefined;
    return c.html(requestPage(c.get('operator'), id, client ?? '', data, reveal !== undefined));
  });
  app.get('/ui/dlq', async (c) => {
    const selection = selectionOf(c.req.query());
    const data = await console
      .deadLetters(selection, limitOf(c.req.query('limit'), 100))
      .catch((err: unknown) => ({ error: err instanceof Error ? err.message : String(err) }));
    return c.html(dlqPage(c.get('operator'), c.req.query(), data));
  });
  app.get('/ui/pauses', (c) =>
    c.html(layout('Pauses', '/ui/pauses', c.get('operator'), pausesBody(c.get('operator')))),
  );
  app.get('/ui/pauses/live', async (c) => c.html(pausesTable(c.get('operator'), await console.pauses())));
  app.get('/ui/tasks', async (c) => {
    const { filter, limit, cursor } = scheduledQuery(c);
    const page = await scheduledPage(await console.sql(), filter, limit, cursor).catch((err: unknown) => ({
      error: err instanceof Error ? err.message : String(err),
    }));
    const selected = filter.client !== undefined || filter.dueAfter || filter.dueBefore;
    const matched =
      c.get('operator').admin === 'write' && selected && !('error' in page)
        ? (await console.cancelScheduled(c.get('operator'), filter, false)).matched
        : undefined;
    return c.html(layout('Tasks', '/ui/tasks', c.get('operator'), scheduledBody(filter, page, matched)));
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
    c.json(await console.partitions(limitOf(c.req.query('limit'), 20), revealTo(c))),
  );
  app.get('/admin/api/requests/:id', async (c) =>
    c.json(await console.request(c.req.param('id'), clientOf(c.req.query('client')), revealTo(c))),
  );
  app.get('/admin/api/requests/:id/events', async (c) => c.json(await console.events(c.req.param('id'))));
  app.get('/admin/api/dlq', async (c) =>
    c.json(
      await console.deadLetters(selectionOf(c.req.query()), limitOf(c.req.query('limit'), 50), revealTo(c)),
    ),
  );
  app.get('/admin/api/pauses', async (c) => c.json(await console.pauses()));
  app.get('/admin/api/tasks/scheduled', (c) => scheduledFromApi(c, () => console.sql()));
  app.post('/admin/api/tasks/scheduled/cancel', (c) =>
    cancelScheduledFromApi(c, c.get('operator'), console.cancelScheduled.bind(console)),
  );
  app.post('/admin/api/pauses', (c) => pauseFromApi(c, c.get('operator'), console));
  app.post('/admin/api/pauses/resume', (c) => resumeFromApi(c, c.get('operator'), console));
  app.post('/admin/api/requests/:id/cancel', (c) =>
    cancelFromApi(c, c.get('operator'), console.cancel.bind(console)),
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
