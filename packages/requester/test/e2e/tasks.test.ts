import type { Sql } from '@requester/shared';
import { eventually, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import {
  dropStackDatabase,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  stackSql,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * Lists by state (issue 22), the scheduled state: the requests waiting in the outbox, by the admin
 * API (pages followed by cursor: every row once, soonest first), the CLI and the Tasks page,
 * filtered by client and due window, with their URLs' secrets hidden.
 */
describe('tasks scheduled: the outbox by page', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let sql: Sql;
  let a: Awaited<ReturnType<typeof stackKey>>;
  let b: Awaited<ReturnType<typeof stackKey>>;
  let reader: Awaited<ReturnType<typeof stackKey>>;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  let results: ResultCollector;
  const day = 86_400_000;
  const start = Date.now();
  const ids = Array.from({ length: 5 }, (_, i) => uniqueName(`sch-${i}`));
  const theirs = uniqueName('sch-b');
  const theirDeadline = new Date(start + 3 * day).toISOString();

  beforeAll(async () => {
    stack = await stackEnv();
    running = await startStack(stack);
    await waitReady(stack);
    target = await startTarget();
    sql = stackSql(stack);
    [a, b, reader, writer] = await Promise.all([
      stackKey(stack),
      stackKey(stack),
      stackKey(stack, { admin: 'read' }),
      stackKey(stack, { admin: 'write' }),
    ]);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    const submit = async (key: typeof a, requestId: string, dueMs: number, deadline?: string) => {
      const response = await fetch(`${stack.httpUrl}/request`, {
        method: 'POST',
        headers: { ...key.headers, 'content-type': 'application/json' },
        body: JSON.stringify({
          request: { uri: `https://user:pw@api.example.test/hook?token=s3cret&n=${requestId}` },
          meta: { requestId, scheduled: new Date(dueMs).toISOString(), ...(deadline ? { deadline } : {}) },
        }),
      });
      expect(response.status).toBe(202);
    };
    // Submitted out of due order: the list orders by due time.
    for (const [i, id] of [...ids.entries()].reverse()) await submit(a, id, start + (i + 1) * day);
    await submit(b, theirs, start + 2 * day, theirDeadline);
    await eventually(
      async () => Number((await sql`select count(*) as n from outbox`)[0]?.n) === 6,
      30_000,
      'six rows in the outbox',
    );
  }, 120_000);

  afterAll(async () => {
    await results?.stop();
    await target?.close();
    await sql?.end({ timeout: 5 });
    await running?.shutdown('test over');
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const api = (query: string) =>
    fetch(`${stack.adminUrl}/admin/api/tasks/scheduled?${query}`, {
      headers: { authorization: `Bearer ${reader.token}` },
    });

  it('admin API: pages by cursor, every row once, soonest first; filters; secrets hidden', async () => {
    const seen: string[] = [];
    let cursor = '';
    for (let pages = 0; pages < 10; pages++) {
      const response = await api(
        `client=${a.name}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(response.status).toBe(200);
      const page = (await response.json()) as {
        rows: Array<{ requestId: string; client: string; uri: string; origin: string }>;
        next: string | null;
      };
      expect(page.rows.length).toBeLessThanOrEqual(2);
      for (const row of page.rows) {
        expect(row.client).toBe(a.name);
        expect(row.origin).toBe('https://api.example.test:443');
        expect(row.uri).not.toContain('s3cret');
        expect(row.uri).not.toContain('pw@');
      }
      seen.push(...page.rows.map((r) => r.requestId));
      if (!page.next) break;
      cursor = page.next;
    }
    expect(seen).toEqual(ids);
    const window = (await (
      await api(
        `dueAfter=${new Date(start + 1.5 * day).toISOString()}&dueBefore=${new Date(start + 3.5 * day).toISOString()}`,
      )
    ).json()) as { rows: Array<{ requestId: string }> };
    expect(window.rows.map((r) => r.requestId).sort()).toEqual([ids[1], ids[2], theirs].sort());
    expect((await api('cursor=nonsense')).status).toBe(400);
  });

  it('CLI: requester tasks scheduled --json, and the Tasks page', async () => {
    const { code, stdout, stderr } = await requester(
      ['tasks', 'scheduled', '--client', b.name, '--json'],
      stack.env,
    ).exit;
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({
      rows: [{ requestId: theirs, client: b.name, deadline: theirDeadline }],
      next: null,
    });
    const page = await fetch(`${stack.adminUrl}/ui/tasks?client=${a.name}&limit=3`, {
      headers: { authorization: `Bearer ${reader.token}` },
    });
    const text = await page.text();
    expect(page.status).toBe(200);
    for (const id of ids.slice(0, 3)) expect(text).toContain(id);
    expect(text).not.toContain(ids[3]);
    expect(text).toContain('data-page="next"');
    expect(text).not.toContain('s3cret');
  }, 60_000);

  it('cancel by selection: a preview count first (CLI, admin API), then every match cancelled; a read key gets 403', async () => {
    const preview = await requester(
      ['tasks', 'scheduled', '--client', a.name, '--cancel', '--json'],
      stack.env,
    ).exit;
    expect(preview.code, preview.stderr).toBe(0);
    expect(JSON.parse(preview.stdout)).toEqual({ matched: 5, cancelled: 0, already: 0, preview: true });
    const route = `${stack.adminUrl}/admin/api/tasks/scheduled/cancel`;
    const post = (token: string, body: unknown) =>
      fetch(route, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await post(reader.token, { client: b.name, confirm: true })).status).toBe(403);
    expect((await post(writer.token, {})).status).toBe(400);
    expect(await (await post(writer.token, { client: b.name })).json()).toEqual({
      matched: 1,
      cancelled: 0,
      already: 0,
      preview: true,
    });
    expect(await (await post(writer.token, { client: b.name, confirm: true })).json()).toEqual({
      matched: 1,
      cancelled: 1,
      already: 0,
      preview: false,
    });
    const result = await results.one(theirs);
    expect(result.response.status).toBe(499);
    expect((result.meta as { cancelled?: { by: string } }).cancelled?.by).toBe(writer.name);
    // The preview cancelled nothing of a's: every row of theirs is still waiting.
    const rowsOf = async (requestIds: string[]) =>
      Number((await sql`select count(*) as n from outbox where request_id = any(${requestIds})`)[0]?.n);
    expect(await rowsOf(ids)).toBe(5);
    // b's woken row leaves the outbox once the relay's delivery of it is deleted, which may come
    // after its cancelled result reached out (the result does not wait for that delete).
    await eventually(
      async () => (await rowsOf([theirs])) === 0,
      30_000,
      "b's cancelled row out of the outbox",
    );
    expect(results.byId.size).toBe(1);
  }, 60_000);
});
