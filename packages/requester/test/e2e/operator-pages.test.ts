import path from 'node:path';
import { eventually, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClientView } from '../../src/ops/clients/index.ts';
import type { KeyView } from '../../src/ops/keys/index.ts';
import type { OriginView } from '../../src/ops/origins/index.ts';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import { logIn, openBrowser, SCREENSHOTS, type TestBrowser } from './browser.fixture.ts';
import {
  type ResultCollector,
  type StackEnv,
  stackKey,
  startStackUnderTest,
  stopStackUnderTest,
} from './stack.fixture.ts';

/**
 * The Keys, Origins and Clients pages of issue 22 over a whole running stack with real data, by
 * their faces: admin API (a read key gets 403 on every action), CLI (`origins`), and the pages in
 * a real headless Chromium — a write key creates a key (its token shown once, never again),
 * rotates it (the old token keeps working for the grace) and revokes it (refused within
 * AUTH_CACHE_TTL), pauses and resumes an origin from its row; a read key sees the same tables
 * with no button. UI_SCREENSHOTS=<dir> saves keys.png, origins.png and clients.png there.
 */

describe('operator pages: keys, origins, clients', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  /** The origins test's own target: no other test calls it, so its counts are its own. */
  let counted: Target;
  let results: ResultCollector;
  let client: Awaited<ReturnType<typeof stackKey>>;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  let reader: Awaited<ReturnType<typeof stackKey>>;
  let context: BrowserContext;
  let browser: TestBrowser | undefined;

  beforeAll(async () => {
    [target, counted] = await Promise.all([startTarget(), startTarget()]);
    ({ stack, running, results } = await startStackUnderTest({
      AUTH_CACHE_TTL: '100ms',
      ORIGIN_CONCURRENCY_SCOPE: 'cluster',
    }));
    [writer, reader] = await Promise.all([
      stackKey(stack, { admin: 'write' }),
      stackKey(stack, { admin: 'read' }),
    ]);
    // Through the admin API: a weight also goes to the queue's shards.
    const name = uniqueName('tenant');
    const made = await fetch(`${stack.adminUrl}/admin/api/keys/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${writer.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, rate: '1000/s', weight: 3, sync: true, schedule: true }),
    });
    expect(made.status).toBe(200);
    const { token } = (await made.json()) as { token: string };
    client = { name, token, headers: { authorization: `Bearer ${token}` } };
    browser = await openBrowser('ui-pages', { width: 1440, height: 800 });
    context = browser.context;
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await stopStackUnderTest({ stack, running, results });
    await Promise.all([target?.close(), counted?.close()]);
  }, 60_000);

  const admin = (route: string, token: string, init: RequestInit = {}) =>
    fetch(`${stack.adminUrl}${route}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers },
    });
  const post = (route: string, token: string, body: unknown) =>
    admin(route, token, { method: 'POST', body: JSON.stringify(body) });
  const submit = (token: string, body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const accepted = async (token: string) =>
    (await submit(token, { request: { uri: `${target.url}/echo` }, meta: { requestId: uniqueName('k') } }))
      .status;

  const login = (page: Page, token: string) => logIn(page, stack.adminUrl, token);
  const logout = (page: Page) => Promise.all([page.waitForURL('**/ui/login'), page.click('#logout')]);

  it('keys: a write key creates, rotates with grace and revokes from the page; the token is shown once; a read key only sees', async () => {
    const doc = (await (await admin('/admin/openapi.json', reader.token)).json()) as { paths: object };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/admin/api/keys',
        '/admin/api/keys/create',
        '/admin/api/keys/rotate',
        '/admin/api/keys/revoke',
        '/admin/api/origins',
        '/admin/api/origins/show',
        '/admin/api/clients',
      ]),
    );
    // The admin API: a read key lists (no secret) and is refused every action.
    const keys = (await (await admin('/admin/api/keys', reader.token)).json()) as KeyView[];
    const listed = keys.find((k) => k.name === client.name);
    expect(listed).toMatchObject({
      rate: '1000/s',
      weight: 3,
      sync: true,
      schedule: true,
      kafkaEntry: false,
    });
    expect(JSON.stringify(keys)).not.toContain(client.token.slice(17));
    for (const [route, body] of [
      ['/admin/api/keys/create', { name: uniqueName('forged') }],
      ['/admin/api/keys/revoke', { key: client.name }],
      ['/admin/api/keys/rotate', { key: client.name }],
    ] as const)
      expect((await post(route, reader.token, body)).status, route).toBe(403);
    expect(await accepted(client.token)).toBe(202);

    // The API for a write key: the token once, in the answer.
    const apiName = uniqueName('api-made');
    const made = await post('/admin/api/keys/create', writer.token, {
      name: apiName,
      hosts: '127.0.0.1',
      sync: true,
    });
    expect(made.status).toBe(200);
    const apiKey = (await made.json()) as { id: string; name: string; token: string };
    expect(apiKey.token).toMatch(/^rqk_[0-9a-f]{12}_/);
    expect(await accepted(apiKey.token)).toBe(202);
    expect((await post('/admin/api/keys/create', writer.token, { name: apiName })).status).toBe(400);

    const page = await context.newPage();
    page.on('dialog', (dialog) => void dialog.accept());
    await login(page, writer.token);
    await page.goto(`${stack.adminUrl}/ui/keys`);
    await page.waitForSelector(`tr[data-key="${client.name}"]`);
    const name = uniqueName('ui-made');
    await page.fill('form[data-action=create-form] input[name=name]', name);
    await page.fill('form[data-action=create-form] input[name=rate]', '50/s');
    await page.check('form[data-action=create-form] input[name=sync]');
    await page.click('button[data-action=create]');
    const token = (await (await page.waitForSelector('#new-token')).textContent())?.trim() ?? '';
    expect(token).toMatch(/^rqk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
    await page.waitForSelector(`tr[data-key="${name}"]`);
    expect(await page.textContent(`tr[data-key="${name}"]`)).toContain('50/s');
    expect(await accepted(token)).toBe(202);
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'keys.png') });
    // Never again: not in the page once it is loaded anew, nor in the API.
    await page.reload();
    await page.waitForSelector(`tr[data-key="${name}"]`);
    const secret = token.slice(17);
    expect(await page.content()).not.toContain(secret);
    expect(await (await admin('/admin/api/keys', writer.token)).text()).not.toContain(secret);

    // Rotate with a grace: a new token; the old one keeps working until then.
    await page.fill(`tr[data-key="${name}"] input[name=grace]`, '1h');
    await page.click(`tr[data-key="${name}"] button[data-action=rotate]`);
    await eventually(
      async () => ((await page.textContent('#new-token')) ?? token).trim() !== token,
      30_000,
      'the rotated token shown',
    );
    const rotated = (await page.textContent('#new-token'))?.trim() ?? '';
    expect(rotated).toMatch(new RegExp(`^${token.slice(0, 17)}`));
    expect(await page.textContent('#flash')).toContain('the old secret works until');
    expect(await accepted(rotated)).toBe(202);
    expect(await accepted(token)).toBe(202);
    await page.waitForSelector(`tr[data-key="${name}"]:has-text("old secret until")`);

    // Revoke: refused within AUTH_CACHE_TTL, gone from the list.
    await page.click(`tr[data-key="${name}"] button[data-action=revoke]`);
    await page.waitForSelector(`tr[data-key="${name}"]`, { state: 'detached' });
    await eventually(async () => (await accepted(rotated)) === 401, 10_000, 'the revoked key refused');
    await logout(page);

    // A read key: the same table, no form, no button.
    await login(page, reader.token);
    await page.goto(`${stack.adminUrl}/ui/keys`);
    await page.waitForSelector(`tr[data-key="${client.name}"]`);
    expect(await page.locator('[data-action]').count()).toBe(0);
    await logout(page);
    await page.close();

    // Each action recorded with its actor; no token in the record.
    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    for (const action of ['keys.create', 'keys.rotate', 'keys.revoke'])
      expect(metrics).toMatch(
        new RegExp(
          `admin_actions_total\\{[^}]*action="${action.replace('.', '\\.')}"[^}]*actor="${writer.name}"`,
        ),
      );
    expect(metrics).not.toContain(secret);
  }, 180_000);

  it('origins: calls, success rate and latency across the deployment, breaker, cap and pause, by API, CLI and page', async () => {
    const origin = new URL(counted.url).origin;
    const ok = Array.from({ length: 8 }, () => uniqueName('ok'));
    const bad = uniqueName('bad');
    for (const requestId of ok)
      expect(
        (
          await submit(client.token, {
            request: { uri: `${counted.url}/echo/${requestId}` },
            meta: { requestId },
          })
        ).status,
      ).toBe(202);
    expect(
      (
        await submit(client.token, {
          request: { uri: `${counted.url}/status/500` },
          meta: { requestId: bad },
        })
      ).status,
    ).toBe(202);
    await results.until(() => [...ok, bad].every((id) => results.byId.has(id)), 60_000, 'calls done');

    // The executors flush their counts every 5 s.
    let view: OriginView | undefined;
    await eventually(
      async () => {
        const rows = (await (await admin('/admin/api/origins', reader.token)).json()) as OriginView[];
        view = rows.find((r) => r.origin.startsWith(origin));
        return (view?.calls.attempts ?? 0) >= 9;
      },
      60_000,
      'the calls counted',
      () => JSON.stringify(view),
    );
    expect(view).toMatchObject({
      breaker: { state: 'closed' },
      bulkhead: { scope: 'cluster', inFlight: 0 },
      pause: null,
      calls: { attempts: 9, windowMinutes: 15 },
    });
    expect(view?.calls.successRate).toBeCloseTo(8 / 9);
    expect(view?.calls.p50Ms).toBeGreaterThan(0);
    expect(view?.calls.p95Ms).toBeGreaterThanOrEqual(view?.calls.p50Ms ?? 0);
    expect(view?.bulkhead.cap).toBeGreaterThan(0);
    const originName = view?.origin ?? '';

    const shown = await requester(['origins', 'show', `${counted.url}/any/path`, '--json'], stack.env).exit;
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ origin: originName, calls: { attempts: 9 } });
    const table = await requester(['origins'], stack.env).exit;
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toContain(originName);
    expect((await requester(['origins', 'show'], stack.env).exit).code).toBe(2);
    expect(
      (await admin(`/admin/api/origins/show?origin=${encodeURIComponent(counted.url)}`, reader.token)).status,
    ).toBe(200);
    expect(
      (await post('/admin/api/pauses', reader.token, { scope: 'origin', value: originName })).status,
    ).toBe(403);

    const page = await context.newPage();
    await login(page, writer.token);
    await page.goto(`${stack.adminUrl}/ui/origins`);
    const row = `tr[data-origin="${originName}"]`;
    await page.waitForSelector(row);
    expect(await page.textContent(row)).toContain('88.9 %');
    await page.click(`${row} button[data-action=pause]`);
    await page.waitForSelector(`${row} button[data-action=resume]`);
    expect(await page.textContent(row)).toContain(`by ${writer.name}`);
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'origins.png') });
    expect((await (await admin('/admin/api/pauses', reader.token)).json()) as unknown[]).toEqual([
      expect.objectContaining({ scope: 'origin', value: originName, by: writer.name }),
    ]);
    await page.click(`${row} button[data-action=resume]`);
    await page.waitForSelector(`${row} button[data-action=pause]`);
    expect(await (await admin('/admin/api/pauses', reader.token)).json()).toEqual([]);
    await logout(page);

    await login(page, reader.token);
    await page.goto(`${stack.adminUrl}/ui/origins`);
    await page.waitForSelector(row);
    expect(await page.locator('[data-action]').count()).toBe(0);
    await logout(page);
    await page.close();
  }, 180_000);

  it('clients: backlog, weight, rate and the wait of the top clients, by API and page', async () => {
    // A paused client's tasks stay queued: a backlog that holds still while we look.
    expect(
      (await post('/admin/api/pauses', writer.token, { scope: 'client', value: client.name })).status,
    ).toBe(200);
    const held = Array.from({ length: 6 }, () => uniqueName('held'));
    try {
      for (const requestId of held)
        expect(
          (
            await submit(client.token, {
              request: { uri: `${target.url}/echo/${requestId}` },
              meta: { requestId },
            })
          ).status,
        ).toBe(202);
      let mine: ClientView | undefined;
      await eventually(
        async () => {
          const rows = (await (
            await admin('/admin/api/clients?top=10', reader.token)
          ).json()) as ClientView[];
          mine = rows.find((r) => r.client === client.name);
          return (mine?.backlog ?? 0) >= held.length;
        },
        60_000,
        'the backlog of the paused client',
        () => JSON.stringify(mine),
      );
      expect(mine).toMatchObject({ weight: 3, rate: '1000/s', liveKey: true, backlog: held.length });
      expect((await admin('/admin/api/clients?top=0', reader.token)).status).toBe(400);

      const page = await context.newPage();
      await login(page, reader.token);
      const row = `tr[data-client="${client.name}"]`;
      // The executor leases a paused client's tasks again every PAUSE_RECHECK_MS to look at the
      // pause, and they are out of the backlog for that moment: read the page until it shows them.
      let backlog = '';
      await eventually(
        async () => {
          await page.goto(`${stack.adminUrl}/ui/clients`);
          await page.waitForSelector(row);
          backlog = (await page.textContent(`${row} td:nth-child(2)`)) ?? '';
          return backlog === String(held.length);
        },
        30_000,
        'the backlog on the Clients page',
        () => backlog,
      );
      expect((await page.textContent(row)) ?? '').toContain('1000/s');
      expect(await page.locator('[data-action]').count()).toBe(0);
      if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'clients.png') });
      await logout(page);
      await page.close();
    } finally {
      await post('/admin/api/pauses/resume', writer.token, { scope: 'client', value: client.name });
    }
    await results.until(() => held.every((id) => results.byId.has(id)), 60_000, 'resumed backlog done');
  }, 180_000);
});
