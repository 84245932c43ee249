import path from 'node:path';
import type { ResultEnvelope, Sql } from '@requester/shared';
import { eventually, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliActor } from '../../src/commands/common.ts';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import { logIn, openBrowser, SCREENSHOTS } from './browser.fixture.ts';
import {
  type ResultCollector,
  type StackEnv,
  stackKey,
  stackSql,
  startStackUnderTest,
  stopStackUnderTest,
} from './stack.fixture.ts';

/**
 * Operator cancel (issue 22) by its three faces against a whole running stack: the admin API (a
 * write key cancels, a read key gets 403), the CLI (`requester cancel`, actor cli:<user>@<host>) and the
 * request page's button in a real Chromium (shown to a write key only). Each cancel is answered by
 * one `cancelled` result naming the operator, the target is never called, and the request's
 * journal shows the cancel and the operator action. With UI_SCREENSHOTS=<dir>, the page is saved
 * there (docs/ui/cancel.png).
 */

describe('operator cancel: admin API, CLI, UI', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let sql: Sql;
  let client: Awaited<ReturnType<typeof stackKey>>;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  let reader: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    ({ stack, running, results } = await startStackUnderTest());
    target = await startTarget();
    sql = stackSql(stack);
    [client, writer, reader] = await Promise.all([
      stackKey(stack),
      stackKey(stack, { admin: 'write' }),
      stackKey(stack, { admin: 'read' }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await target?.close();
    await sql?.end({ timeout: 5 });
    await stopStackUnderTest({ stack, running, results });
  }, 60_000);

  const submit = async (body: unknown) => {
    const response = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...client.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(202);
  };
  /** A request scheduled a week ahead, parked in the outbox. */
  const scheduled = async (requestId: string) => {
    await submit({
      request: { uri: `${target.url}/echo/${requestId}` },
      meta: { requestId, scheduled: new Date(Date.now() + 7 * 86_400_000).toISOString() },
    });
    await eventually(
      async () =>
        Number((await sql`select count(*) as n from outbox where request_id = ${requestId}`)[0]?.n) === 1,
      30_000,
      `${requestId} waits in the outbox`,
    );
  };
  const admin = (route: string, token: string, init: RequestInit = {}) =>
    fetch(`${stack.adminUrl}${route}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers },
    });
  const cancelledBy = (result: ResultEnvelope, by: string) => {
    expect(result.response.status).toBe(499);
    expect(result.meta.error?.code).toBe('cancelled');
    expect((result.meta as { cancelled?: { by: string } }).cancelled?.by).toBe(by);
  };
  const callsTo = (requestId: string) => target.calls.filter((c) => c.path.includes(requestId)).length;

  it('admin API: a write key cancels (journaled), a read key gets 403, a bad id 400', async () => {
    const requestId = uniqueName('api-cancel');
    await scheduled(requestId);
    const route = `/admin/api/requests/${encodeURIComponent(requestId)}/cancel`;
    const body = JSON.stringify({ client: client.name });
    expect((await admin(route, reader.token, { method: 'POST', body })).status).toBe(403);
    const done = await admin(route, writer.token, { method: 'POST', body });
    expect(done.status).toBe(200);
    expect(await done.json()).toMatchObject({
      requestId,
      client: client.name,
      by: writer.name,
      first: true,
      outboxWoken: 1,
    });
    cancelledBy(await results.one(requestId), writer.name);
    expect(callsTo(requestId)).toBe(0);
    expect(
      (await admin('/admin/api/requests/a%20b/cancel', writer.token, { method: 'POST', body })).status,
    ).toBe(400);
    // The journal tells the story: cancelled by the operator, the operator's action, the result.
    await eventually(
      async () => {
        const story = (await (
          await admin(`/admin/api/requests/${requestId}/events`, reader.token)
        ).json()) as {
          events: Array<Record<string, unknown>>;
        };
        const types = story.events.map((e) => e.type);
        return (
          story.events.some((e) => e.type === 'cancelled' && e.by === writer.name) &&
          story.events.some((e) => e.type === 'admin_action' && e.action === 'request.cancel') &&
          types.includes('completed')
        );
      },
      30_000,
      'the journal shows the cancel',
    );
    const doc = (await (await admin('/admin/openapi.json', reader.token)).json()) as {
      paths: Record<string, unknown>;
    };
    expect(doc.paths['/admin/api/requests/{id}/cancel']).toBeDefined();
  }, 90_000);

  it('CLI: requester cancel takes back a request behind an ordered head, as cli:<user>@<host>', async () => {
    const partition = `!${uniqueName('cli-order')}`;
    const hold = uniqueName('cli-hold');
    const [head, behind] = [uniqueName('cli-head'), uniqueName('cli-behind')];
    await submit({ request: { uri: `${target.url}/hold/${hold}` }, meta: { requestId: head, partition } });
    await eventually(() => target.holding(hold) === 1, 30_000, 'the head is in flight');
    await submit({
      request: { uri: `${target.url}/echo/${behind}` },
      meta: { requestId: behind, partition },
    });
    const { code, stdout, stderr } = await requester(
      ['cancel', behind, '--client', client.name, '--json'],
      stack.env,
    ).exit;
    expect(code, stderr).toBe(0);
    const actor = cliActor(); // cli:<user>@<host>, or CLI_ACTOR's
    expect(JSON.parse(stdout)).toMatchObject({
      requestId: behind,
      client: client.name,
      by: actor,
      first: true,
    });
    target.release(hold);
    expect((await results.one(head)).response.status).toBe(200);
    cancelledBy(await results.one(behind), actor);
    expect(callsTo(behind)).toBe(0);
    const usage = await requester(['cancel', 'has space'], stack.env).exit;
    expect(usage.code).toBe(2);
  }, 90_000);

  it('UI: the request page cancels for a write key, and shows no button to a read key', async () => {
    const requestId = uniqueName('ui-cancel');
    await scheduled(requestId);
    const browser = await openBrowser('ui-cancel');
    try {
      const page = await browser.context.newPage();
      const login = (token: string) => logIn(page, stack.adminUrl, token);
      const lookup = `${stack.adminUrl}/ui/requests?id=${encodeURIComponent(requestId)}&client=${encodeURIComponent(client.name)}`;

      await login(reader.token);
      await page.goto(lookup);
      expect(await page.locator('button[data-action=cancel]').count()).toBe(0);
      await Promise.all([page.waitForURL('**/ui/login'), page.click('#logout')]);

      await login(writer.token);
      await page.goto(lookup);
      page.once('dialog', (dialog) => void dialog.accept());
      await page.click('button[data-action=cancel]');
      await page.waitForSelector('#flash .flash');
      expect(await page.textContent('#flash')).toContain(`cancelled ${requestId} of ${client.name}`);
      if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'cancel.png') });
      cancelledBy(await results.one(requestId), writer.name);
      expect(callsTo(requestId)).toBe(0);
    } finally {
      await browser.close();
    }
  }, 120_000);
});
