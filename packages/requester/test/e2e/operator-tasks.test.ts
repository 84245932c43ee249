import { QueueAdmin, queueFromConfig } from '@requester/queue';
import { Cancellations, createRedis, type RedisClient, type Sql } from '@requester/shared';
import { silentLogger, startTarget, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelMatching, type TaskPage } from '../../src/ops/tasks/index.ts';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import { logIn, openBrowser, type TestBrowser } from './browser.fixture.ts';
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
 * Lists by state (issue 22) over a whole running stack with real work in every state: calls held
 * by the target (in flight), an ordered partition queued behind its held head (pending), schedules
 * inside REDIS_HORIZON (scheduled, Redis) and beyond it (scheduled, the outbox), a task the executor
 * buried (dead). Each list by the admin API (paged by cursor: every task once), the CLI and the
 * Tasks page in a real Chromium (a tab per state, a filter, the bulk cancel's preview then its
 * confirm); and a bulk cancel that dies halfway, finished by running it again: every request
 * cancelled once, one result each.
 */

describe('tasks by state: pending, scheduled, in-flight, dead', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let sql: Sql;
  let redis: RedisClient;
  let a: Awaited<ReturnType<typeof stackKey>>;
  let c: Awaited<ReturnType<typeof stackKey>>;
  let d: Awaited<ReturnType<typeof stackKey>>;
  let reader: Awaited<ReturnType<typeof stackKey>>;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  let browser: TestBrowser | undefined;
  /** One Chromium for the file's UI tests, opened by the first that needs it. */
  const browserContext = async () => {
    browser ??= await openBrowser('tasks-ui');
    return browser.context;
  };
  const minute = 60_000;

  async function submit(key: typeof a, envelope: Record<string, unknown>): Promise<void> {
    const res = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...key.headers, 'content-type': 'application/json' },
      body: JSON.stringify(envelope),
    });
    expect(res.status, await res.clone().text()).toBe(202);
  }

  const api = async (route: string, token = reader.token, init: RequestInit = {}) =>
    fetch(`${stack.adminUrl}${route}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers },
    });

  /** Every page of a list by the admin API, `limit` rows at a time. */
  async function walk(state: string, query: string, limit: number): Promise<TaskPage['rows']> {
    const rows: TaskPage['rows'] = [];
    let cursor = '';
    for (let pages = 0; pages < 100; pages++) {
      const res = await api(
        `/admin/api/tasks/${state}?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(res.status, await res.clone().text()).toBe(200);
      const page = (await res.json()) as TaskPage;
      expect(page.rows.length).toBeLessThanOrEqual(limit);
      rows.push(...page.rows);
      if (!page.next) return rows;
      cursor = page.next;
    }
    throw new Error('the list did not end');
  }

  beforeAll(async () => {
    target = await startTarget();
    ({ stack, running, results } = await startStackUnderTest({
      REDIS_HORIZON: '10m',
      AUTH_CACHE_TTL: '100ms',
      TARGET_RESPONSE_TIMEOUT: '10m',
    }));
    sql = stackSql(stack);
    redis = createRedis({ url: stack.config.redisUrl });
    [a, c, d, reader, writer] = await Promise.all([
      stackKey(stack),
      stackKey(stack),
      stackKey(stack),
      stackKey(stack, { admin: 'read' }),
      stackKey(stack, { admin: 'write' }),
    ]);
    // In flight: three of a's calls held by the target.
    for (const n of [1, 2, 3])
      await submit(a, { request: { uri: `${target.url}/hold/fly?n=${n}` }, meta: { requestId: `fly-${n}` } });
    // Pending: c's ordered partition, its head held, three due behind it.
    for (const n of [1, 2, 3, 4])
      await submit(c, {
        request: { uri: `${target.url}/hold/ord?n=${n}` },
        // ord-3 with a priority (meta.priority, through the router into the queue and the lists).
        meta: { requestId: `ord-${n}`, partition: '!ord', ...(n === 3 ? { priority: 4 } : {}) },
      });
    // Scheduled: two inside REDIS_HORIZON (Redis timers), one beyond (the outbox); soon-1 and far-1
    // with a concurrency key (meta.concurrency, read from the request as the debounce key is).
    for (const n of [1, 2])
      await submit(a, {
        request: { uri: `${target.url}/echo?n=${n}` },
        meta: {
          requestId: `soon-${n}`,
          scheduled: new Date(Date.now() + 5 * minute).toISOString(),
          ...(n === 1 ? { concurrency: { key: 'ck-soon', limit: 2 } } : {}),
        },
      });
    await submit(a, {
      request: { uri: `${target.url}/echo?n=far` },
      meta: {
        requestId: 'far-1',
        scheduled: new Date(Date.now() + 2 * 86_400_000).toISOString(),
        concurrency: { key: 'ck-far', limit: 7 },
      },
    });
    // Debounced (scheduled until their bursts end): one in Redis, one beyond REDIS_HORIZON (the outbox).
    await submit(d, {
      request: { uri: `${target.url}/echo?n=deb` },
      meta: { requestId: 'deb-1', debounce: { key: 'dk-soon', delay: '8m' } },
    });
    await submit(d, {
      request: { uri: `${target.url}/echo?n=deb` },
      meta: { requestId: 'deb-2', debounce: { key: 'dk-far', delay: '1h' } },
    });
    // Dead: a task the executor cannot read, buried by it.
    const queue = queueFromConfig(stack.config, redis, { notify: false });
    await queue.publish([{ id: `junk:0 @${c.name}`, partition: `#junk @${c.name}`, payload: 'not a task' }]);
    await until('the held calls', async () =>
      target.holding('fly') === 3 && target.holding('ord') === 1 ? true : undefined,
    );
    await until('the buried task', async () => {
      const dead = await new QueueAdmin(queue).listTasks('dead', { client: c.name }, 10);
      return dead.tasks.length === 1 ? true : undefined;
    });
    await until('the far ones in the outbox', async () =>
      Number((await sql`select count(*) as n from outbox`)[0]?.n) === 2 ? true : undefined,
    );
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    target?.release('fly');
    target?.release('ord');
    redis?.disconnect();
    await sql?.end({ timeout: 5 });
    await stopStackUnderTest({ stack, running, results });
    await target?.close();
  }, 60_000);

  it('admin API: each state paged by cursor, every task once, filtered', async () => {
    const origin = `http://127.0.0.1:${new URL(target.url).port}`;
    const inFlight = await walk('in-flight', `client=${a.name}`, 2);
    expect(inFlight.map((r) => r.requestId).sort()).toEqual(['fly-1', 'fly-2', 'fly-3']);
    for (const row of inFlight) {
      expect(row).toMatchObject({
        state: 'in-flight',
        store: 'redis',
        client: a.name,
        origin,
        deliveries: 1,
      });
      expect(Date.parse(row.leaseExpiresAt ?? '')).toBeGreaterThan(Date.now() - minute);
      expect(row.leaseToken).toContain(`fly-`);
    }
    expect((await walk('in-flight', `client=${c.name}`, 5)).map((r) => r.requestId)).toEqual(['ord-1']);
    expect(await walk('in-flight', `client=${a.name}&origin=https://elsewhere.test`, 5)).toEqual([]);

    const pending = await walk('pending', `client=${c.name}`, 1);
    expect(pending.map((r) => r.requestId)).toEqual(['ord-2', 'ord-3', 'ord-4']);
    expect(pending.every((r) => r.partition === `!ord @${c.name}` && r.tryCount === 0)).toBe(true);
    expect(pending.map((r) => r.priority)).toEqual([0, 4, 0]);
    expect((await walk('pending', `partition=${encodeURIComponent(`!ord @${c.name}`)}`, 2)).length).toBe(3);
    expect((await walk('pending', `client=${c.name}&partition=!ord&origin=${origin}`, 2)).length).toBe(3);
    expect(await walk('pending', `client=${c.name}&olderThan=1h`, 5)).toEqual([]);

    const scheduled = await walk('scheduled', `client=${a.name}`, 1);
    expect(scheduled.map((r) => [r.requestId, r.store])).toEqual([
      ...(scheduled[0]?.requestId === 'soon-1'
        ? [
            ['soon-1', 'redis'],
            ['soon-2', 'redis'],
          ]
        : [
            ['soon-2', 'redis'],
            ['soon-1', 'redis'],
          ]),
      ['far-1', 'outbox'],
    ]);
    const soon = await walk(
      'scheduled',
      `client=${a.name}&dueBefore=${new Date(Date.now() + 10 * minute).toISOString()}`,
      10,
    );
    expect(soon.map((r) => r.requestId).sort()).toEqual(['soon-1', 'soon-2']);
    // A request with a concurrency key shows it and its limit, in Redis and in the outbox; others none.
    expect(Object.fromEntries(scheduled.map((r) => [r.requestId, r.concurrency]))).toEqual({
      'soon-1': { key: 'ck-soon', limit: 2 },
      'soon-2': null,
      'far-1': { key: 'ck-far', limit: 7 },
    });
    expect(pending.every((r) => r.concurrency === null)).toBe(true);

    // A debounced request shows its key, in Redis and in the outbox; others none.
    const debounced = await walk('scheduled', `client=${d.name}`, 5);
    expect(debounced.map((r) => [r.requestId, r.store, r.debounce])).toEqual([
      ['deb-1', 'redis', 'dk-soon'],
      ['deb-2', 'outbox', 'dk-far'],
    ]);
    expect(scheduled.every((r) => r.debounce === null)).toBe(true);

    const dead = await walk('dead', `client=${c.name}`, 5);
    expect(dead).toMatchObject([{ state: 'dead', taskId: `junk:0 @${c.name}`, requestId: null }]);
    expect(dead[0]?.reason).toBeTruthy();

    expect((await api('/admin/api/tasks/sleeping')).status).toBe(400);
    expect((await api('/admin/api/tasks/pending?cursor=nonsense')).status).toBe(400);
    expect((await api('/admin/api/tasks/pending?limit=5000')).status).toBe(400);
    const openapi = (await (await api('/admin/openapi.json')).json()) as { paths: Record<string, unknown> };
    for (const state of ['pending', 'scheduled', 'in-flight', 'dead'])
      expect(openapi.paths).toHaveProperty([`/admin/api/tasks/${state}`]);
  }, 120_000);

  it('CLI: requester tasks <state> as a table and as JSON, a page and its cursor', async () => {
    const table = await requester(['tasks', 'pending', '--client', c.name, '--limit', '2'], stack.env).exit;
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toContain('ord-2');
    expect(table.stdout).toContain('ord-3');
    expect(table.stdout).not.toContain('ord-4');
    const cursor = /--cursor '([^']+)'/.exec(table.stderr)?.[1];
    expect(cursor, table.stderr).toBeTruthy();
    const rest = await requester(
      ['tasks', 'pending', '--client', c.name, '--limit', '2', '--cursor', cursor ?? '', '--json'],
      stack.env,
    ).exit;
    expect(rest.code, rest.stderr).toBe(0);
    expect((JSON.parse(rest.stdout) as TaskPage).rows.map((r) => r.requestId)).toEqual(['ord-4']);
    const inFlight = await requester(['tasks', 'in-flight', '--client', a.name, '--json'], stack.env).exit;
    expect(inFlight.code, inFlight.stderr).toBe(0);
    expect((JSON.parse(inFlight.stdout) as TaskPage).rows).toHaveLength(3);
    const dead = await requester(['tasks', 'dead', '--client', c.name], stack.env).exit;
    expect(dead.code, dead.stderr).toBe(0);
    expect(dead.stdout).toContain('not a queued task');
    const debounced = await requester(['tasks', 'scheduled', '--client', d.name], stack.env).exit;
    expect(debounced.code, debounced.stderr).toBe(0);
    expect(debounced.stdout).toMatch(/DEBOUNCE/);
    expect(debounced.stdout).toContain('dk-soon');
    expect(debounced.stdout).toContain('dk-far');
    const keyed = await requester(['tasks', 'scheduled', '--client', a.name], stack.env).exit;
    expect(keyed.code, keyed.stderr).toBe(0);
    expect(keyed.stdout).toMatch(/CONCURRENCY/);
    expect(keyed.stdout).toContain('ck-soon (limit 2)');
    expect(keyed.stdout).toContain('ck-far (limit 7)');
    const wrong = await requester(['tasks', 'dead', '--client', c.name, '--cancel'], stack.env).exit;
    expect(wrong.code).not.toBe(0);
  }, 600_000);

  it('UI: the Tasks page, a tab per state, and the cancel preview before its confirm', async () => {
    const context = await browserContext();
    const page = await context.newPage();
    const login = (token: string) => logIn(page, stack.adminUrl, token);
    await login(reader.token);
    await page.goto(`${stack.adminUrl}/ui/tasks?state=pending&client=${c.name}`);
    expect(await page.locator('nav.tabs a.on').textContent()).toBe('pending');
    expect(await page.locator('table[data-state=pending] tr').count()).toBe(4);
    expect(await page.locator('[data-action=cancel-preview]').count()).toBe(0);
    await Promise.all([
      page.waitForURL('**state=in-flight**'),
      page.click('nav.tabs a[data-state=in-flight]'),
    ]);
    // The filter goes along with the tab.
    expect(await page.locator('table[data-state=in-flight]').textContent()).toContain('ord-1');
    await page.click('nav.tabs a[data-state=dead]');
    await page.waitForURL('**state=dead**');
    expect(await page.locator('table[data-state=dead]').textContent()).toContain('not a queued task');
    await page.goto(`${stack.adminUrl}/ui/tasks?state=scheduled&client=${d.name}`);
    const debounced = await page.locator('table[data-state=scheduled]').textContent();
    expect(debounced).toContain('debounce');
    expect(debounced).toContain('dk-soon');
    expect(debounced).toContain('dk-far');
    await page.goto(`${stack.adminUrl}/ui/tasks?state=scheduled&client=${a.name}`);
    const keyed = await page.locator('table[data-state=scheduled]').textContent();
    expect(keyed).toContain('concurrency');
    expect(keyed).toContain('ck-soon (limit 2)');
    expect(keyed).toContain('ck-far (limit 7)');

    await page.goto(`${stack.adminUrl}/ui/logout`).catch(() => {});
    await context.clearCookies();
    await login(writer.token);
    await page.goto(`${stack.adminUrl}/ui/tasks?state=scheduled&client=${a.name}`);
    expect(await page.locator('table[data-state=scheduled] tr').count()).toBe(4);
    await page.click('[data-action=cancel-preview]');
    await page.locator('#flash [data-preview]').waitFor();
    expect(await page.locator('#flash').textContent()).toContain('3 scheduled tasks match');
    // The preview cancelled nothing.
    const cancels = new Cancellations(redis, stack.config.redisPrefix, 60_000);
    expect(await cancels.find(a.name, 'far-1')).toBeUndefined();
    await page.click('[data-action=confirm-cancel]');
    await until('the cancel answered', async () =>
      (await page.locator('#flash').textContent())?.includes('Cancelled 3') ? true : undefined,
    );
    for (const id of ['soon-1', 'soon-2', 'far-1']) expect(await cancels.find(a.name, id)).toBeDefined();
    // The outbox row is woken and answered now, not in two days.
    const far = await results.one('far-1');
    expect(far.response.status).toBe(499);
  }, 180_000);

  it('bulk cancel: a run that dies halfway is finished by running it again; one cancel, one result each', async () => {
    const parts = {
      queueAdmin: () => new QueueAdmin(queueFromConfig(stack.config, redis, { notify: false })),
      sql: async () => sql,
      redis,
      config: stack.config,
      logger: silentLogger,
    };
    const filter = { client: c.name, partition: '!ord' };
    expect(await cancelMatching(parts, 'test', 'pending', filter, false)).toEqual({
      matched: 3,
      cancelled: 0,
      already: 0,
      preview: true,
    });
    // A page of one, and the process "dies" after the first page.
    await expect(
      cancelMatching(
        parts,
        'test',
        'pending',
        filter,
        true,
        () => {
          throw new Error('killed');
        },
        1,
      ),
    ).rejects.toThrow('killed');
    const rerun = await requester(
      ['tasks', 'pending', '--client', c.name, '--partition', '!ord', '--cancel', '--yes', '--json'],
      stack.env,
    ).exit;
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(JSON.parse(rerun.stdout)).toEqual({ matched: 3, cancelled: 2, already: 1, preview: false });
    expect(rerun.stderr).toContain('3 pending tasks match');
    expect(rerun.stderr).toMatch(/cancelling: 3\/3 pending tasks/);
    // The head runs; the three behind it are answered cancelled, each once.
    target.release('ord');
    await results.until(
      () => ['ord-1', 'ord-2', 'ord-3', 'ord-4'].every((id) => results.byId.has(id)),
      60_000,
      'the ordered partition answered',
    );
    expect(results.byId.get('ord-1')?.map((r) => r.response.status)).toEqual([200]);
    for (const id of ['ord-2', 'ord-3', 'ord-4'])
      expect(results.byId.get(id)?.map((r) => r.response.status)).toEqual([499]);
    expect(target.calls.filter((call) => call.path.startsWith('/hold/ord'))).toHaveLength(1);
  }, 180_000);

  it('DLQ replay by filter: a preview first (admin API, the Dead letters page), then the replay once', async () => {
    const ids = ['gone-1', 'gone-2'];
    for (const id of ids)
      await submit(a, {
        request: { uri: `${target.url}/status/404?id=${id}` },
        meta: { requestId: id, retry: { max: 1 } },
      });
    await until('two dead letters of a', async () => {
      const body = (await (await api(`/admin/api/dlq?client=${a.name}`)).json()) as { entries: unknown[] };
      return body.entries.length === 2 ? true : undefined;
    });
    await results.until(() => ids.every((id) => results.byId.has(id)), 60_000, 'the first results');
    const replay = (body: unknown) =>
      api('/admin/api/dlq/replay', writer.token, { method: 'POST', body: JSON.stringify(body) });
    const preview = (await (await replay({ client: a.name, dryRun: true })).json()) as {
      dryRun: boolean;
      replayed: Array<{ requestId: string }>;
    };
    expect(preview.dryRun).toBe(true);
    expect(preview.replayed.map((r) => r.requestId).sort()).toEqual(ids);
    expect(await replay({ client: a.name, dryRun: true }).then((r) => r.status)).toBe(200);

    const page = await (await browserContext()).newPage();
    await page.goto(`${stack.adminUrl}/ui/dlq?client=${a.name}`);
    await page.click('[data-action=replay-preview]');
    await page.locator('#flash [data-preview]').waitFor();
    expect(await page.locator('#flash').textContent()).toContain('2 dead letters would be replayed');
    // Nothing was replayed by the previews: one result each so far.
    for (const id of ids) expect(results.byId.get(id)).toHaveLength(1);
    await page.click('[data-action=confirm-replay]');
    await results.until(
      () => ids.every((id) => (results.byId.get(id)?.length ?? 0) >= 2),
      60_000,
      'the replays answered',
    );
    for (const id of ids) expect(results.byId.get(id)).toHaveLength(2);
  }, 180_000);
});
