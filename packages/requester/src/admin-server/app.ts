import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { RequesterError, UsageError } from '@requester/shared';
import { type Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { secureHeaders } from 'hono/secure-headers';
import { ADMIN_FEATURES } from '../ops/index.ts';
import { flash, loginPage, type Nav } from '../ui/layout.ts';
import type { AdminConsole } from './console.ts';
import type { Env } from './http.ts';
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
 * Origin of this very host; so must logout. SameSite does not keep the cookie from a page on
 * another port of this host (the same site), and a GET carries no Origin: so revealing secrets
 * with the cookie is a POST too (http.ts revealTo). Every answer carries SECURITY_HEADERS: no
 * framing, no inline script, no referrer to other sites.
 *
 * The pages and the API routes are the features' `ui.ts` and `api.ts` (ops/<feature>/), added
 * from the one list of ops/index.ts; this file is the frame: assets, login, authentication, the
 * errors' answers.
 */
export const ADMIN_COOKIE = 'requester_admin';

/**
 * The UI needs nothing inline: its scripts and styles are files of /ui/assets, htmx evaluates no
 * code (htmx-config in ui/layout.ts), and uPlot styles through the CSSOM, which style-src allows.
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

const require = createRequire(import.meta.url);
const ASSETS: Record<string, { file: string; type: string }> = {
  'htmx.js': { file: require.resolve('htmx.org/dist/htmx.min.js'), type: 'text/javascript' },
  'uplot.js': { file: require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript' },
  'uplot.css': { file: require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css' },
  'app.js': { file: join(import.meta.dirname, '../ui/assets/app.js'), type: 'text/javascript' },
  'ui.css': { file: join(import.meta.dirname, '../ui/assets/ui.css'), type: 'text/css' },
};
const assetCache = new Map<string, string>();

/** The UI's menu: the `nav` of each feature's UI, in the order of ops/index.ts. */
const NAV: Nav = ADMIN_FEATURES.flatMap((f) => (f.ui?.nav ? [f.ui.nav] : []));

export function adminApp(console: AdminConsole): Hono<Env> {
  const app = new Hono<Env>();
  app.use('*', SECURITY_HEADERS);
  app.use('*', async (c, next) => {
    c.set('nav', NAV);
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
  app.get('/ui/login', (c) => c.html(loginPage(NAV)));
  app.post('/ui/login', async (c) => {
    if (!sameOrigin(c)) return c.text('cross-site login refused', 403);
    const form = await c.req.parseBody();
    const token = typeof form.token === 'string' ? form.token.trim() : '';
    const operator = await console.identify(token).catch(() => undefined);
    if (!operator) return c.html(loginPage(NAV, 'Not an API key with an admin scope (or revoked).'), 401);
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
    // A page on another port of this host is the same site: SameSite sends it the cookie.
    if (!sameOrigin(c)) return c.text('cross-site logout refused', 403);
    await console.sessions.close(getCookie(c, ADMIN_COOKIE));
    deleteCookie(c, ADMIN_COOKIE, { path: '/', secure: overHttps(c, console) });
    return c.redirect('/ui/login', 303);
  });
  app.get('/admin/openapi.json', (c) => c.json(adminOpenApiDocument()));

  app.use('/ui/*', authenticate(console, 'ui'));
  app.use('/ui', authenticate(console, 'ui'));
  app.use('/admin/api/*', authenticate(console, 'api'));

  for (const feature of ADMIN_FEATURES) feature.ui?.routes(app, console);
  app.get('/admin/api/whoami', (c) => c.json(c.get('operator')));
  for (const feature of ADMIN_FEATURES) feature.api?.routes(app, console);
  app.onError((err, c) => {
    // Bad input is a UsageError (400); what the operator's scope does not allow, `forbidden` (403).
    const status =
      err instanceof UsageError ? 400 : err instanceof RequesterError && err.code === 'forbidden' ? 403 : 503;
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

/**
 * Whether a browser's request comes from a page of this very origin: its Origin names this host
 * (none sent: not a browser's cross-origin POST) and, where the browser says, Sec-Fetch-Site is
 * `same-origin` (another port of this host is `same-site`, whose requests SameSite lets through).
 */
function sameOrigin(c: Context): boolean {
  const site = c.req.header('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin') return false;
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
