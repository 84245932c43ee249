import { createServer, type Server } from 'node:http';
import { KeyStore } from '@requester/ingress';
import type { Sql } from '@requester/shared';
import { eventually, freePort, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { logIn, openBrowser, type TestBrowser } from './browser.fixture.ts';
import {
  dropStackDatabase,
  type StackEnv,
  stackEnv,
  stackKey,
  stackSql,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * The admin port against a page of another site on the same host (issue 49): a page on another
 * port of 127.0.0.1 is the same site, so the SameSite=Strict cookie goes along with what it makes
 * the operator's browser send. It may neither log the operator out (a form POST) nor record
 * reveals of secrets in their name (an `<img>` of a `?reveal=true` view, which carries no Origin);
 * the request page reveals by a same-origin POST instead, journaled as the operator's. And a
 * rotated admin key's new token works on the admin port at once, while the old one lasts its
 * grace, although the port had the key cached (AUTH_CACHE_TTL 1 h here).
 */
describe('admin port: another site on the same host, a rotated admin key', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let browser: TestBrowser | undefined;
  let context: BrowserContext;
  let attacker: Server | undefined;
  let attackerUrl: string;
  let sql: Sql;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  const secretBody = uniqueName('secret-body');
  const echoId = uniqueName('echo');
  let client: Awaited<ReturnType<typeof stackKey>>;
  /** The query naming whose request `echoId` is (requestIds are per client). */
  let lookup: string;

  beforeAll(async () => {
    target = await startTarget();
    stack = await stackEnv({ AUTH_CACHE_TTL: '1h' });
    running = await startStack(stack);
    await waitReady(stack);
    sql = stackSql(stack);
    client = await stackKey(stack);
    lookup = `?client=${client.name}`;
    writer = await stackKey(stack, { admin: 'write' });
    // A sync call whose result (held by this process's sync-gateway) is a secret: what a reveal shows.
    const echo = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...client.headers, 'content-type': 'application/json' },
      body: JSON.stringify({
        request: { method: 'POST', uri: `${target.url}/echo`, body: secretBody },
        meta: { requestId: echoId, sync: true },
      }),
    });
    expect(echo.status).toBe(200);

    // The other site: a page on another port of the same host that the operator happens to open.
    const port = await freePort();
    attackerUrl = `http://127.0.0.1:${port}/`;
    const page = `<!doctype html><html><body>
<img id="api" src="${stack.adminUrl}/admin/api/requests/${echoId}${lookup}&reveal=true">
<img id="ui" src="${stack.adminUrl}/ui/requests?id=${echoId}&client=${client.name}&reveal=true">
<form method="post" action="${stack.adminUrl}/ui/logout"><button id="prize">Claim your prize</button></form>
</body></html>`;
    attacker = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(page));
    await new Promise<void>((resolve) => attacker?.listen(port, '127.0.0.1', resolve));
    browser = await openBrowser('cross-site');
    context = browser.context;
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => (attacker ? attacker.close(resolve) : resolve(undefined)));
    await sql?.end({ timeout: 5 });
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const reveals = async () => {
    const res = await fetch(`${stack.adminUrl}/admin/api/requests/${echoId}/events`, {
      headers: writer.headers,
    });
    const { events } = (await res.json()) as { events: Array<Record<string, unknown>> };
    return events.filter((e) => e.type === 'admin_action' && e.action === 'secrets.reveal');
  };

  /** What `page` asked the admin port for (path and query), answered or not. */
  function adminRequests(page: Page): string[] {
    const asked: string[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.origin === stack.adminUrl) asked.push(`${url.pathname}${url.search}`);
    });
    return asked;
  }

  it("a page on another port neither logs the operator out nor reveals in the operator's name", async () => {
    const page = await context.newPage();
    await logIn(page, stack.adminUrl, writer.token);
    const asked = adminRequests(page);
    // 'load': once its images are loaded (their answers reach the server's side only: the admin
    // port's Cross-Origin-Resource-Policy keeps them from the page, as it should).
    await page.goto(attackerUrl, { waitUntil: 'load' });
    expect(asked).toEqual(expect.arrayContaining([`/admin/api/requests/${echoId}${lookup}&reveal=true`]));
    // The journal of the request holds the reveals in the order they were made: a marker made
    // after the page loaded (a Bearer reveal) comes alone if the page's were refused.
    const marker = await fetch(`${stack.adminUrl}/admin/api/requests/${echoId}${lookup}&reveal=true`, {
      headers: writer.headers,
    });
    expect(marker.status).toBe(200);
    await eventually(async () => (await reveals()).length > 0, 15_000, 'the marker in the journal');
    expect(await reveals()).toHaveLength(1);

    const [logout] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${stack.adminUrl}/ui/logout`),
      page.click('#prize'),
    ]);
    expect(logout.status()).toBe(403);
    await page.goto(`${stack.adminUrl}/ui/overview`);
    expect(page.url()).toContain('/ui/overview'); // still logged in
    await page.close();
  }, 60_000);

  it("Show them on the request page reveals by a same-origin POST, journaled as the operator's", async () => {
    const page = await context.newPage();
    await page.goto(`${stack.adminUrl}/ui/requests?id=${echoId}&client=${client.name}`);
    expect(page.url()).toContain('/ui/requests'); // the session of the test before is still open
    expect(await page.content()).not.toContain(secretBody);
    await page.click('[data-action=reveal]');
    await page.waitForSelector('#secrets .warn');
    expect(await page.content()).toContain(secretBody);
    await eventually(async () => (await reveals()).length > 1, 15_000, 'the reveal in the journal');
    // The marker of the test before, and this one: the operator's own.
    expect(await reveals()).toEqual([
      expect.objectContaining({ actor: writer.name, outcome: 'done' }),
      expect.objectContaining({ actor: writer.name, outcome: 'done' }),
    ]);

    // The page's own Log out still works.
    await Promise.all([page.waitForURL('**/ui/login'), page.click('#logout')]);
    await page.close();
  }, 60_000);

  it('with the session cookie, reveal=true by GET is refused; a Bearer key still reveals by GET', async () => {
    const login = await fetch(`${stack.adminUrl}/ui/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: writer.token }),
      redirect: 'manual',
    });
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const byCookie = await fetch(`${stack.adminUrl}/admin/api/requests/${echoId}${lookup}&reveal=true`, {
      headers: { cookie },
    });
    expect(byCookie.status).toBe(403);
    expect(await byCookie.text()).not.toContain(secretBody);
    const byBearer = await fetch(`${stack.adminUrl}/admin/api/requests/${echoId}${lookup}&reveal=true`, {
      headers: writer.headers,
    });
    expect(byBearer.status).toBe(200);
    expect(await byBearer.text()).toContain(secretBody);
    // Logout, like login and every action, needs this origin when the browser names one.
    const elsewhere = await fetch(`${stack.adminUrl}/ui/logout`, {
      method: 'POST',
      headers: { cookie, origin: 'http://127.0.0.1:1', 'sec-fetch-site': 'same-site' },
      redirect: 'manual',
    });
    expect(elsewhere.status).toBe(403);
    const whoami = await fetch(`${stack.adminUrl}/admin/api/whoami`, { headers: { cookie } });
    expect(whoami.status).toBe(200);
  });

  it("a rotated admin key's new token works on the admin port at once; the old one for its grace", async () => {
    const key = await stackKey(stack, { admin: 'write' });
    const whoami = (token: string) =>
      fetch(`${stack.adminUrl}/admin/api/whoami`, { headers: { authorization: `Bearer ${token}` } });
    expect((await whoami(key.token)).status).toBe(200); // the admin port has the key cached now
    const rotated = await new KeyStore(sql).rotate(key.name, 3_600_000);
    const fresh = rotated?.token as string;
    expect((await whoami(fresh)).status).toBe(200);
    expect((await whoami(key.token)).status).toBe(200);
    const login = await fetch(`${stack.adminUrl}/ui/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: fresh }),
      redirect: 'manual',
    });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/ui/overview');
  });
});
