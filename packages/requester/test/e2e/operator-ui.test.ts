import { hash } from 'node:crypto';
import path from 'node:path';
import { KeyStore } from '@requester/ingress';
import type { Sql } from '@requester/shared';
import { startTarget, type Target } from '@requester/shared/testing';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { openBrowser, SCREENSHOTS, type TestBrowser } from './browser.fixture.ts';
import {
  type ResultCollector,
  type StackEnv,
  stackKey,
  stackSql,
  startStackUnderTest,
  stopStackUnderTest,
  until,
} from './stack.fixture.ts';

/**
 * The operator UI of the admin port in a real headless Chromium (Debian's, `infra/chromium.sh`)
 * against a whole running stack with real data: dead letters on the DLQ topic, an open breaker, a
 * blocked ordered partition, a limiter's windows. A write key acts from the browser (a replay puts
 * the result on out; a reset breaker lets the next call through); a read-only key sees no action
 * and its forged POST is refused. Every page runs under the admin port's Content-Security-Policy
 * without a violation, and cannot be framed; a login is a session (not the key) that logout,
 * expiry, revocation and rotation end on the server. With UI_SCREENSHOTS=<dir>, each page is saved
 * there as a PNG (docs/ui/ holds the committed ones).
 */

describe('operator UI (admin port /ui)', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let targetA: Target;
  let targetB: Target;
  let results: ResultCollector;
  let client: Awaited<ReturnType<typeof stackKey>>;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  let reader: Awaited<ReturnType<typeof stackKey>>;
  let context: BrowserContext;
  let browser: TestBrowser | undefined;
  let sql: Sql;
  /** What Chromium reported about the Content-Security-Policy on any page (nothing, if the UI needs no exception). */
  const cspViolations: string[] = [];

  beforeAll(async () => {
    [targetA, targetB] = await Promise.all([startTarget(), startTarget()]);
    ({ stack, running, results } = await startStackUnderTest({
      BREAKER_FAILURE_THRESHOLD: '2',
      BREAKER_OPEN_DURATION: '10m',
      BREAKER_STATE_CACHE: '100ms',
      AUTH_CACHE_TTL: '100ms',
      ADMIN_SESSION_TTL: '2h',
      ADMIN_TRUST_PROXY: 'true',
    }));
    [client, writer, reader] = await Promise.all([
      stackKey(stack),
      stackKey(stack, { admin: 'write' }),
      stackKey(stack, { admin: 'read' }),
    ]);
    browser = await openBrowser('ui', { width: 1280, height: 800 });
    context = browser.context;
    context.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) cspViolations.push(message.text());
    });
    sql = stackSql(stack);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await sql?.end({ timeout: 5 });
    targetA?.release('ord');
    await stopStackUnderTest({ stack, running, results });
    await Promise.all([targetA?.close(), targetB?.close()]);
  }, 60_000);

  async function submit(envelope: Record<string, unknown>): Promise<void> {
    const res = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...client.headers, 'content-type': 'application/json' },
      body: JSON.stringify(envelope),
    });
    expect(res.status, await res.clone().text()).toBe(202);
  }

  const admin = (route: string, token: string, init: RequestInit = {}) =>
    fetch(`${stack.adminUrl}${route}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers },
    });

  async function login(page: Page, token: string): Promise<void> {
    await page.goto(`${stack.adminUrl}/ui/overview`);
    expect(page.url()).toContain('/ui/login');
    await page.fill('input[name=token]', token);
    await Promise.all([page.waitForURL('**/ui/overview'), page.click('button[type=submit]')]);
  }

  async function shot(page: Page, name: string): Promise<void> {
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`) });
  }

  it('shows every page with real data, and acts with a write key', async () => {
    // Real state: two dead letters, an open breaker, an ordered partition blocked behind a held
    // call, a limiter that made a task wait, a far schedule in the outbox.
    targetA.switches.set('dl', 404);
    targetB.switches.set('brk', 503);
    await submit({
      request: { uri: `${targetA.url}/switch/dl?n=1` },
      meta: { requestId: 'ui-dead-1', retry: { max: 1 } },
    });
    await submit({
      request: { uri: `${targetA.url}/switch/dl?n=2` },
      meta: { requestId: 'ui-dead-2', retry: { max: 1 } },
    });
    for (const n of [1, 2, 3])
      await submit({
        request: { uri: `${targetB.url}/switch/brk?n=${n}` },
        meta: { requestId: `ui-brk-${n}`, retry: { max: 1 } },
      });
    for (const n of [1, 2, 3])
      await submit({
        request: { uri: `${targetA.url}/hold/ord?n=${n}` },
        meta: { requestId: `ui-ord-${n}`, partition: '!ord' },
      });
    const limiter = { key: 'ui-limit', algorithm: 'token-bucket', rates: [{ duration: '1m', value: 1 }] };
    for (const n of [1, 2])
      await submit({
        request: { uri: `${targetA.url}/echo?n=${n}` },
        meta: { requestId: `ui-lim-${n}`, partition: '!lim', limiter },
      });
    await submit({
      request: { uri: `${targetA.url}/echo?n=later` },
      meta: { requestId: 'ui-later', scheduled: new Date(Date.now() + 3_600_000).toISOString() },
    });
    // Not the breaker's requests: which of the three ends before the breaker opens (and which
    // waits for it to half-open) depends on how their calls interleave; the open breaker is awaited below.
    await results.until(
      () => ['ui-dead-1', 'ui-dead-2', 'ui-lim-1'].every((id) => results.byId.has(id)),
      60_000,
      'first results',
    );
    const originB = new URL(targetB.url).origin;
    await until('the breaker of target B open', async () => {
      const rows = (await (await admin('/admin/api/breakers', writer.token)).json()) as Array<{
        origin: string;
        state: string;
      }>;
      return rows.find((r) => r.origin.startsWith(originB) && r.state === 'open');
    });
    await until('two dead letters listed', async () => {
      const body = (await (
        await admin(`/admin/api/dlq?origin=${encodeURIComponent(targetA.url)}`, writer.token)
      ).json()) as {
        entries: unknown[];
      };
      return body.entries.length >= 2 ? body : undefined;
    });

    const page = await context.newPage();
    await login(page, writer.token);

    // Overview: live cards (htmx polling) and the chart.
    await page.waitForSelector('#live .card');
    await expect.poll(() => page.textContent('#live'), { timeout: 15_000 }).toMatch(/breakers open\s*/);
    const live = (await page.textContent('#live')) ?? '';
    expect(live).toContain('queue depth');
    expect(live).toContain('outbox rows');
    await page.waitForSelector('#chart .u-wrap', { timeout: 15_000 });
    await page.waitForTimeout(4_000); // a few samples on the chart
    await shot(page, 'overview');

    // Partitions: the blocked ordered one with its head, and why.
    await page.goto(`${stack.adminUrl}/ui/partitions`);
    await expect.poll(() => page.textContent('main'), { timeout: 15_000 }).toContain('!ord');
    const partitions = (await page.textContent('main')) ?? '';
    expect(partitions).toMatch(/bulkhead: ordered/);
    expect(partitions).toContain('limiter: key ui-limit');
    await shot(page, 'partitions');

    // Dead letters: filter, then replay one from the UI — its result comes on out.
    await page.goto(`${stack.adminUrl}/ui/dlq?origin=${encodeURIComponent(targetA.url)}`);
    expect(await page.textContent('main')).toContain('ui-dead-1');
    await shot(page, 'dead-letters');
    targetA.switches.set('dl', 200);
    const ref1 = await page.getAttribute('input[data-request-id="ui-dead-1"]', 'value');
    await page.check('input[data-request-id="ui-dead-1"]');
    await page.click('button[data-action=replay-selected]');
    await expect.poll(() => page.textContent('#flash'), { timeout: 30_000 }).toContain('Replayed 1');
    await results.until(
      () => (results.byId.get('ui-dead-1') ?? []).some((r) => r.response.status === 200),
      30_000,
      'replayed ui-dead-1',
    );

    // Delete (mark handled): gone from the list.
    page.on('dialog', (dialog) => void dialog.accept());
    await page.check(`input[value="${ref1}"]`);
    await page.click('button[data-action=delete-selected]');
    await expect.poll(() => page.textContent('#flash'), { timeout: 30_000 }).toContain('Marked 1');
    await page.goto(`${stack.adminUrl}/ui/dlq?origin=${encodeURIComponent(targetA.url)}`);
    expect(await page.textContent('main')).not.toContain(`${ref1}`);

    // Request lookup: the dead letter, its journal timeline, and Replay.
    await page.goto(`${stack.adminUrl}/ui/requests?id=ui-dead-2`);
    await expect.poll(() => page.textContent('#timeline'), { timeout: 10_000 }).toContain('dead_lettered');
    expect(await page.textContent('#timeline')).toContain('accepted');
    expect(await page.textContent('main')).toContain('404');
    await shot(page, 'request');
    await page.click('button[data-action=replay]');
    await expect.poll(() => page.textContent('#flash'), { timeout: 30_000 }).toContain('Replayed 1');
    await results.until(
      () => (results.byId.get('ui-dead-2') ?? []).some((r) => r.response.status === 200),
      30_000,
      'replayed ui-dead-2',
    );
    // Operator actions are in the journal of the requests they named, with who did them.
    const adminActions = async (requestId: string) => {
      const res = await admin(`/admin/api/requests/${requestId}/events`, writer.token);
      const body = (await res.json()) as { events: Array<Record<string, unknown>> };
      return body.events.filter((e) => e.type === 'admin_action');
    };
    await expect
      .poll(() => adminActions('ui-dead-2'), { timeout: 10_000 })
      .toEqual([expect.objectContaining({ action: 'dlq.replay', actor: writer.name, outcome: 'done' })]);
    await expect
      .poll(() => adminActions('ui-dead-1'), { timeout: 10_000 })
      .toEqual([
        expect.objectContaining({ action: 'dlq.replay', actor: writer.name }),
        expect.objectContaining({ action: 'dlq.delete', actor: writer.name }),
      ]);

    // Breakers: open, reset from the UI, then the next call goes through.
    await page.goto(`${stack.adminUrl}/ui/breakers`);
    await page.waitForSelector('button[data-action=reset]');
    expect(await page.textContent('#breakers')).toContain('open');
    await shot(page, 'breakers');
    targetB.switches.set('brk', 200);
    await page.click('button[data-action=reset]');
    await expect.poll(() => page.textContent('#flash'), { timeout: 15_000 }).toContain('Closed the breaker');
    await submit({
      request: { uri: `${targetB.url}/switch/brk?n=after` },
      meta: { requestId: 'ui-brk-after', retry: { max: 1 } },
    });
    expect((await results.one('ui-brk-after', 30_000)).response.status).toBe(200);

    // Limiters: the windows of the key the requests used (a limiter key is its client's).
    await page.goto(`${stack.adminUrl}/ui/limiters?key=ui-limit&client=${client.name}&rate=1/1m`);
    expect(await page.textContent('main')).toContain('token-bucket');
    await shot(page, 'limiters');
    await page.close();
    // Every page above (htmx polling and actions, the chart, the timeline) ran under the CSP.
    expect(cspViolations).toEqual([]);
  }, 240_000);

  it('a read-only key sees no action, and its forged actions get 403', async () => {
    await context.clearCookies();
    const page = await context.newPage();
    await login(page, reader.token);
    await page.goto(`${stack.adminUrl}/ui/dlq`);
    expect(await page.textContent('main')).toContain('ui-dead-2');
    expect(await page.locator('button[data-action]').count()).toBe(0);
    await page.goto(`${stack.adminUrl}/ui/requests?id=ui-dead-2`);
    expect(await page.locator('button[data-action]').count()).toBe(0);
    await page.goto(`${stack.adminUrl}/ui/breakers/show?origin=${encodeURIComponent(targetB.url)}`);
    expect(await page.locator('button[data-action]').count()).toBe(0);
    // Forged, with the read key as Bearer, and from the page with its cookie.
    const forged = await admin('/admin/api/breakers/reset', reader.token, {
      method: 'POST',
      body: JSON.stringify({ origin: targetB.url }),
    });
    expect(forged.status).toBe(403);
    const replay = await admin('/admin/api/dlq/replay', reader.token, {
      method: 'POST',
      body: JSON.stringify({ requestIds: ['ui-dead-2'] }),
    });
    expect(replay.status).toBe(403);
    const fromPage = await page.evaluate(async (origin) => {
      const res = await fetch('/admin/api/breakers/reset', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ origin }),
      });
      return res.status;
    }, targetB.url);
    expect(fromPage).toBe(403);
    await page.close();
    // No key, or a key without an admin scope: 401.
    expect((await fetch(`${stack.adminUrl}/admin/api/overview`)).status).toBe(401);
    expect((await admin('/admin/api/overview', client.token)).status).toBe(401);
    const doc = (await (await fetch(`${stack.adminUrl}/admin/openapi.json`)).json()) as { paths: object };
    expect(Object.keys(doc.paths)).toContain('/admin/api/dlq/replay');
  }, 60_000);

  /** The session id the browser holds for the admin port, and its cookie's attributes. */
  async function sessionCookie() {
    const cookies = await context.cookies(stack.adminUrl);
    const cookie = cookies.find((c) => c.name === 'requester_admin');
    if (!cookie) throw new Error(`no session cookie: ${cookies.map((c) => c.name).join(', ')}`);
    return cookie;
  }

  /** Whether a cookie value opens the admin API (and the UI) now. */
  async function opens(value: string): Promise<boolean> {
    const api = await fetch(`${stack.adminUrl}/admin/api/whoami`, {
      headers: { cookie: `requester_admin=${value}` },
    });
    const ui = await fetch(`${stack.adminUrl}/ui/overview`, {
      headers: { cookie: `requester_admin=${value}` },
      redirect: 'manual',
    });
    expect(api.status === 200, 'the admin API and the UI agree').toBe(ui.status === 200);
    return api.status === 200;
  }

  it('every answer of the admin port carries a CSP, frame and referrer protections', async () => {
    const routes = [
      '/ui/login',
      '/ui/overview',
      '/ui/assets/app.js',
      '/admin/api/overview',
      '/admin/openapi.json',
    ];
    for (const route of routes) {
      const res = await fetch(`${stack.adminUrl}${route}`, { redirect: 'manual' });
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp, route).toContain("frame-ancestors 'none'");
      expect(csp, route).toContain("script-src 'self'");
      expect(csp, route).toContain("default-src 'none'");
      expect(csp, route).not.toContain('unsafe-inline');
      expect(csp, route).not.toContain('unsafe-eval');
      expect(res.headers.get('x-frame-options'), route).toBe('DENY');
      expect(res.headers.get('referrer-policy'), route).toBe('same-origin');
      expect(res.headers.get('x-content-type-options'), route).toBe('nosniff');
    }
    // A page of another origin cannot frame the UI: Chromium refuses to render it.
    const page = await context.newPage();
    await page.setContent(`<iframe id="ui" src="${stack.adminUrl}/ui/login"></iframe>`);
    const frame = await (await page.waitForSelector('#ui')).contentFrame();
    await frame?.waitForLoadState();
    expect(await frame?.content()).not.toContain('Operator login');
    await page.close();
    cspViolations.length = 0; // the refused frame is the one violation expected
  }, 60_000);

  it('a login is a random session, not the key; logout ends it on the server', async () => {
    await context.clearCookies();
    const page = await context.newPage();
    await login(page, writer.token);
    const session = await sessionCookie();
    expect(session.value).not.toContain(writer.token);
    expect(session.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', secure: false, path: '/' });
    // ADMIN_SESSION_TTL=2h: the cookie lives as long as the session, not beyond.
    expect(session.expires * 1000).toBeLessThanOrEqual(Date.now() + 2 * 3_600_000);
    expect(session.expires * 1000).toBeGreaterThan(Date.now() + 3_600_000);
    expect(await opens(session.value)).toBe(true);
    // The key itself is not a session (it was, once: a stolen cookie was a stolen key).
    expect(await opens(writer.token)).toBe(false);

    await Promise.all([page.waitForURL('**/ui/login'), page.click('#logout')]);
    expect(await opens(session.value)).toBe(false); // a copy of the cookie is worth nothing now
    await page.goto(`${stack.adminUrl}/ui/overview`);
    expect(page.url()).toContain('/ui/login');
    await page.close();
  }, 60_000);

  it('revoking the key, or rotating its secret away, ends its sessions at once; so does expiry', async () => {
    const keys = new KeyStore(sql);
    const session = async (token: string) => {
      await context.clearCookies();
      const page = await context.newPage();
      await login(page, token);
      const { value } = await sessionCookie();
      return { page, value };
    };

    const revoked = await stackKey(stack, { admin: 'read' });
    const one = await session(revoked.token);
    expect(await keys.revoke(revoked.name)).toBe(true);
    await one.page.goto(`${stack.adminUrl}/ui/dlq`);
    expect(one.page.url()).toContain('/ui/login');
    expect(await opens(one.value)).toBe(false);
    await one.page.close();

    const rotated = await stackKey(stack, { admin: 'read' });
    const two = await session(rotated.token);
    await keys.rotate(rotated.name, 3_600_000); // the old secret keeps working for its grace: so does its session
    await two.page.goto(`${stack.adminUrl}/ui/dlq`);
    expect(two.page.url()).toContain('/ui/dlq');
    await keys.rotate(rotated.name, 0); // the secret it logged in with is gone now
    await two.page.goto(`${stack.adminUrl}/ui/breakers`);
    expect(two.page.url()).toContain('/ui/login');
    expect(await opens(two.value)).toBe(false);
    await two.page.close();

    const expiring = await session(writer.token);
    expect(await opens(expiring.value)).toBe(true);
    const idHash = hash('sha256', expiring.value, 'buffer');
    const moved = await sql`update requester_admin_sessions set expires_at = now() - interval '1 second'
      where id_hash = ${idHash}`;
    expect(moved.count).toBe(1); // only a hash of the id is stored
    expect(await opens(expiring.value)).toBe(false);
    await expiring.page.close();
  }, 60_000);

  it('behind a TLS-terminating proxy (ADMIN_TRUST_PROXY), a login over https gets a Secure cookie', async () => {
    const loginWith = (headers: Record<string, string>) =>
      fetch(`${stack.adminUrl}/ui/login`, {
        method: 'POST',
        headers,
        body: new URLSearchParams({ token: reader.token }),
        redirect: 'manual',
      });
    const proxied = (await loginWith({ 'x-forwarded-proto': 'https' })).headers.get('set-cookie') ?? '';
    expect(proxied).toMatch(/; Secure/);
    expect(proxied).toMatch(/; HttpOnly/);
    expect(proxied).toMatch(/; SameSite=Strict/);
    expect(proxied).toMatch(/; Max-Age=7200/);
    const plain = (await loginWith({})).headers.get('set-cookie') ?? '';
    expect(plain).toMatch(/; HttpOnly/);
    expect(plain).not.toMatch(/Secure/);
  });
});
