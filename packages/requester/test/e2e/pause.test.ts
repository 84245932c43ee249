import path from 'node:path';
import { eventually, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import { logIn, openBrowser, SCREENSHOTS } from './browser.fixture.ts';
import {
  type ResultCollector,
  type StackEnv,
  stackKey,
  startStackUnderTest,
  stopStackUnderTest,
} from './stack.fixture.ts';

/**
 * Pause and resume (issue 22; docs/architecture.md §15) through every role: work of a paused
 * origin or partition is held by the executors — the journal shows it held by the pause — while
 * other work runs; nothing of it reaches the target; at resume (or `until`) it runs where it was,
 * an ordered partition in order, each request once, with no attempt counted for the pause. By the
 * admin API (a read key gets 403), the CLI and the Pauses page in Chromium (UI_SCREENSHOTS=<dir>
 * saves docs/ui/pauses.png).
 */

describe('pause and resume', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let paused: Target;
  let other: Target;
  let results: ResultCollector;
  let client: Awaited<ReturnType<typeof stackKey>>;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  let reader: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    [paused, other] = await Promise.all([startTarget(), startTarget()]);
    ({ stack, running, results } = await startStackUnderTest());
    [client, writer, reader] = await Promise.all([
      stackKey(stack),
      stackKey(stack, { admin: 'write' }),
      stackKey(stack, { admin: 'read' }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await stopStackUnderTest({ stack, running, results });
    await Promise.all([paused?.close(), other?.close()]);
  }, 60_000);

  const submit = async (body: unknown) => {
    const response = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...client.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(202);
  };
  const admin = (route: string, token: string, init: RequestInit = {}) =>
    fetch(`${stack.adminUrl}${route}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers },
    });
  /** Waits until the journal of `requestId` shows it held by a pause. */
  const heldByPause = (requestId: string) =>
    eventually(
      async () => {
        const story = (await (
          await admin(`/admin/api/requests/${requestId}/events`, reader.token)
        ).json()) as {
          events: Array<Record<string, unknown>>;
        };
        return story.events.some((e) => e.type === 'held' && e.by === 'pause');
      },
      30_000,
      `${requestId} held by the pause`,
    );

  it('an origin paused by the admin API holds its work, ordered and retrying, until the CLI resumes it', async () => {
    const origin = new URL(paused.url).origin;
    const body = JSON.stringify({ scope: 'origin', value: paused.url });
    expect((await admin('/admin/api/pauses', reader.token, { method: 'POST', body })).status).toBe(403);
    const done = await admin('/admin/api/pauses', writer.token, { method: 'POST', body });
    expect(done.status).toBe(200);
    expect(await done.json()).toMatchObject({ scope: 'origin', by: writer.name, until: null });
    expect(await (await admin('/admin/api/pauses', reader.token)).json()).toEqual([
      expect.objectContaining({ scope: 'origin', value: expect.stringContaining('127.0.0.1') }),
    ]);

    const partition = `!${uniqueName('paused-order')}`;
    const ordered = Array.from({ length: 5 }, (_, i) => uniqueName(`po-${i}`));
    for (const requestId of ordered)
      await submit({ request: { uri: `${paused.url}/echo/${requestId}` }, meta: { requestId, partition } });
    const flaky = uniqueName('pf');
    await submit({
      request: { uri: `${paused.url}/flaky/${flaky}/1` },
      meta: { requestId: flaky, retry: { max: 3, delay: '100ms' } },
    });
    const control = uniqueName('control');
    await submit({ request: { uri: `${other.url}/echo/${control}` }, meta: { requestId: control } });

    expect((await results.one(control)).response.status).toBe(200);
    await heldByPause(ordered[0] as string);
    await heldByPause(flaky);
    expect(paused.calls).toHaveLength(0);

    const { code, stdout, stderr } = await requester(['resume', 'origin', paused.url, '--json'], stack.env)
      .exit;
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ scope: 'origin', resumed: true });
    expect(JSON.parse(stdout).value).toContain(new URL(origin).hostname);

    await results.until(
      () => [...ordered, flaky].every((id) => results.byId.has(id)),
      60_000,
      'resumed work done',
    );
    for (const id of ordered) {
      expect(results.byId.get(id)).toHaveLength(1);
      expect(results.byId.get(id)?.[0]?.meta.tryCount).toBe(1);
    }
    // In order at the target, each once.
    expect(paused.calls.filter((c) => c.path.startsWith('/echo/')).map((c) => c.path.slice(6))).toEqual(
      ordered,
    );
    // The flaky one: its first attempt (503) and the retry; the pause counted none.
    expect(results.byId.get(flaky)?.[0]?.response.status).toBe(200);
    expect(results.byId.get(flaky)?.[0]?.meta.tryCount).toBe(2);
  }, 120_000);

  it('a partition paused by the CLI with --until resumes by itself', async () => {
    const partition = `!${uniqueName('until')}`;
    const { code, stdout, stderr } = await requester(
      ['pause', 'partition', partition, '--client', client.name, '--until', '3s', '--json'],
      stack.env,
    ).exit;
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ scope: 'partition', value: `${partition} @${client.name}` });
    const [first, second] = [uniqueName('u-0'), uniqueName('u-1')];
    await submit({ request: { uri: `${other.url}/echo/${first}` }, meta: { requestId: first, partition } });
    await submit({ request: { uri: `${other.url}/echo/${second}` }, meta: { requestId: second, partition } });
    await heldByPause(first);
    await results.until(() => results.byId.has(first) && results.byId.has(second), 60_000, 'ran after until');
    expect(
      other.calls.filter((c) => c.path.endsWith(first) || c.path.endsWith(second)).map((c) => c.path),
    ).toEqual([`/echo/${first}`, `/echo/${second}`]);
    const usage = await requester(['pause', 'origin', 'not a url'], stack.env).exit;
    expect(usage.code).toBe(2);
  }, 90_000);

  it('the Pauses page pauses and resumes for a write key, and shows no button to a read key', async () => {
    const browser = await openBrowser('ui-pause');
    const pausedClient = uniqueName('tenant');
    try {
      const page = await browser.context.newPage();
      const login = (token: string) => logIn(page, stack.adminUrl, token);
      await login(writer.token);
      await page.goto(`${stack.adminUrl}/ui/pauses`);
      await page.selectOption('select[name=scope]', 'client');
      await page.fill('input[name=value]', pausedClient);
      await page.fill('input[name=until]', '2h');
      await page.click('button[data-action=pause]');
      await page.waitForSelector(`td:has-text("${pausedClient}")`);
      expect(await page.textContent('#flash')).toContain(`Paused client ${pausedClient}`);
      if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'pauses.png') });
      await Promise.all([page.waitForURL('**/ui/login'), page.click('#logout')]);

      await login(reader.token);
      await page.goto(`${stack.adminUrl}/ui/pauses`);
      await page.waitForSelector(`td:has-text("${pausedClient}")`);
      expect(await page.locator('button[data-action]').count()).toBe(0);
      await Promise.all([page.waitForURL('**/ui/login'), page.click('#logout')]);

      await login(writer.token);
      await page.goto(`${stack.adminUrl}/ui/pauses`);
      await page.click(`tr:has-text("${pausedClient}") button[data-action=resume]`);
      await page.waitForSelector(`td:has-text("${pausedClient}")`, { state: 'detached' });
      expect(await (await admin('/admin/api/pauses', reader.token)).json()).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 120_000);
});
