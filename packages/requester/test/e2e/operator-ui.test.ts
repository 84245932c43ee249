import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTarget, type Target } from '@requester/shared/testing';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.ts';

/**
 * The operator UI of the admin port in a real headless Chromium (Debian's, `infra/chromium.sh`)
 * against a whole running stack with real data: dead letters on the DLQ topic, an open breaker, a
 * blocked ordered partition, a limiter's windows. A write key acts from the browser (a replay puts
 * the result on out; a reset breaker lets the next call through); a read-only key sees no action
 * and its forged POST is refused. With UI_SCREENSHOTS=<dir>, each page is saved there as a PNG
 * (docs/ui/ holds the committed ones).
 */
const CHROMIUM = '/usr/bin/chromium';
const SHOTS = process.env.UI_SCREENSHOTS;

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
  let userDataDir: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`${CHROMIUM} is missing: run \`bash infra/chromium.sh\` (./dev test does)`);
    [targetA, targetB] = await Promise.all([startTarget(), startTarget()]);
    stack = await stackEnv({
      BREAKER_FAILURE_THRESHOLD: '2',
      BREAKER_OPEN_DURATION: '10m',
      BREAKER_STATE_CACHE: '100ms',
      AUTH_CACHE_TTL: '100ms',
    });
    running = await startStack(stack);
    await waitReady(stack);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    [client, writer, reader] = await Promise.all([
      stackKey(stack),
      stackKey(stack, { admin: 'write' }),
      stackKey(stack, { admin: 'read' }),
    ]);
    userDataDir = await mkdtemp(path.join(tmpdir(), 'requester-ui-'));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1280, height: 800 },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    if (SHOTS) await mkdir(SHOTS, { recursive: true });
  }, 180_000);

  afterAll(async () => {
    await context?.close();
    if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
    await results?.stop();
    targetA?.release('ord');
    await running?.shutdown('test over');
    await Promise.all([targetA?.close(), targetB?.close()]);
    if (stack) await dropStackDatabase(stack);
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

  async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  async function login(page: Page, token: string): Promise<void> {
    await page.goto(`${stack.adminUrl}/ui/overview`);
    expect(page.url()).toContain('/ui/login');
    await page.fill('input[name=token]', token);
    await Promise.all([page.waitForURL('**/ui/overview'), page.click('button[type=submit]')]);
  }

  async function shot(page: Page, name: string): Promise<void> {
    if (SHOTS) await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
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
    await results.until(
      () =>
        ['ui-dead-1', 'ui-dead-2', 'ui-brk-1', 'ui-brk-2', 'ui-lim-1'].every((id) => results.byId.has(id)),
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
});
