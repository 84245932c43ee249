import { createRedis, type RedisClient } from '@requester/shared/redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { uniquePrefix } from '../test/queue.fixture.ts';
import { QueueAdmin } from './admin.ts';
import { FairQueue, type ListedTask, type TaskListFilter, type TaskListState } from './index.ts';

/** Every page of a list, `limit` at a time: each page bounded, the whole list once. */
async function walk(
  admin: QueueAdmin,
  state: TaskListState,
  filter: TaskListFilter,
  limit: number,
): Promise<ListedTask[]> {
  const all: ListedTask[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1_000; pages++) {
    const page = await admin.listTasks(state, filter, limit, cursor);
    expect(page.tasks.length).toBeLessThanOrEqual(limit);
    all.push(...page.tasks);
    if (page.next === null) return all;
    cursor = page.next;
  }
  throw new Error('the list did not end');
}

const idsOf = (tasks: ListedTask[]) => tasks.map((t) => t.id).sort();

describe('QueueAdmin.listTasks (single Redis)', () => {
  let redis: RedisClient;
  let queue: FairQueue;
  let admin: QueueAdmin;

  beforeAll(async () => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  });
  afterAll(() => redis.disconnect());
  afterEach(async () => {
    await queue.close();
    const { violations } = await admin.verify();
    await admin.destroy();
    expect(violations).toEqual([]);
  });

  function makeQueue(): void {
    queue = new FairQueue({ redis, prefix: uniquePrefix(), shards: 4, refreshMs: 0 });
    admin = new QueueAdmin(queue);
  }

  it('pages through due, later, leased and dead tasks, each once, with filters', async () => {
    makeQueue();
    const hour = 3_600_000;
    const now = Date.now();
    const tasks = Array.from({ length: 40 }, (_, i) => ({
      id: `t${i}`,
      partition: `${i % 3 === 0 ? '!ord' : `p${i % 5}`} @${i % 2 ? 'billing' : 'search'}`,
      payload: JSON.stringify({ i }),
      ...(i < 12 ? { dueAt: now + hour + i * 1000 } : {}),
    }));
    await queue.publish(tasks);
    // 10 leased at once (one deadline: ties in the leases set), 4 of them buried.
    const { tasks: leased } = await queue.lease(10, 600_000);
    expect(leased).toHaveLength(10);
    for (const task of leased.slice(0, 4)) await queue.deadLetter(task.token, 'test: buried');
    const leasedIds = leased.slice(4).map((t) => t.id);
    const deadIds = leased.slice(0, 4).map((t) => t.id);
    const laterIds = tasks.slice(0, 12).map((t) => t.id);
    const dueIds = tasks
      .map((t) => t.id)
      .filter((id) => !laterIds.includes(id) && !leasedIds.includes(id) && !deadIds.includes(id));

    for (const limit of [1, 3, 50]) {
      expect(idsOf(await walk(admin, 'later', {}, limit))).toEqual([...laterIds].sort());
      expect(idsOf(await walk(admin, 'due', {}, limit))).toEqual([...dueIds].sort());
      expect(idsOf(await walk(admin, 'leased', {}, limit))).toEqual([...leasedIds].sort());
      expect(idsOf(await walk(admin, 'dead', {}, limit))).toEqual([...deadIds].sort());
    }
    const leasedRows = await walk(admin, 'leased', {}, 2);
    for (const row of leasedRows) {
      expect(row.token).toContain(row.id);
      expect(row.at).toBeGreaterThan(now);
      expect(row.deliveries).toBe(1);
    }
    expect((await walk(admin, 'dead', {}, 2)).every((r) => r.reason === 'test: buried')).toBe(true);

    // Filters: a client, a partition, a due window, an age.
    const billing = tasks.filter((t) => t.partition.endsWith('@billing')).map((t) => t.id);
    expect(idsOf(await walk(admin, 'later', { client: 'billing' }, 2))).toEqual(
      laterIds.filter((id) => billing.includes(id)).sort(),
    );
    expect(idsOf(await walk(admin, 'due', { client: 'nobody' }, 5))).toEqual([]);
    const partition = tasks.find((t) => t.id === dueIds[0])?.partition ?? '';
    const inIt = tasks.filter((t) => t.partition === partition && dueIds.includes(t.id)).map((t) => t.id);
    expect(inIt.length).toBeGreaterThan(0);
    expect(idsOf(await walk(admin, 'due', { partition }, 1))).toEqual(inIt.sort());
    const window = { from: now + hour + 3_000, to: now + hour + 7_000 };
    expect(idsOf(await walk(admin, 'later', window, 2))).toEqual(['t3', 't4', 't5', 't6']);
    expect(await walk(admin, 'due', { publishedBefore: now - hour }, 10)).toEqual([]);
    expect(idsOf(await walk(admin, 'dead', { publishedBefore: Date.now() + 60_000 }, 1))).toEqual(
      [...deadIds].sort(),
    );
  });

  it("lists each task's priority, pending and leased (0 when it has none)", async () => {
    makeQueue();
    await queue.publish([
      { id: 'p-high', payload: '{}', priority: 7 },
      { id: 'p-low', payload: '{}', priority: -3 },
      { id: 'p-none', payload: '{}' },
    ]);
    const priorities = (tasks: ListedTask[]) => Object.fromEntries(tasks.map((t) => [t.id, t.priority]));
    expect(priorities(await walk(admin, 'due', {}, 10))).toEqual({ 'p-high': 7, 'p-low': -3, 'p-none': 0 });
    await queue.lease(3, 600_000);
    expect(priorities(await walk(admin, 'leased', {}, 10))).toEqual({
      'p-high': 7,
      'p-low': -3,
      'p-none': 0,
    });
  });

  it('a cursor stays valid while tasks move: nothing is listed twice', async () => {
    makeQueue();
    await queue.publish(
      Array.from({ length: 30 }, (_, i) => ({ id: `m${i}`, partition: `q${i}`, payload: '{}' })),
    );
    const first = await admin.listTasks('due', {}, 10);
    expect(first.tasks).toHaveLength(10);
    // Some tasks leave the due state between two pages.
    await queue.lease(5, 600_000);
    const rest = await walk(admin, 'due', {}, 10);
    const after = first.next
      ? await (async () => {
          const seen: ListedTask[] = [];
          let cursor: string | undefined = first.next ?? undefined;
          while (cursor) {
            const page = await admin.listTasks('due', {}, 10, cursor);
            seen.push(...page.tasks);
            cursor = page.next ?? undefined;
          }
          return seen;
        })()
      : [];
    const seenTwice = idsOf(after).filter((id) => first.tasks.some((t) => t.id === id));
    expect(seenTwice).toEqual([]);
    expect(rest).toHaveLength(25);
    await expect(admin.listTasks('due', {}, 10, 'not-a-cursor')).rejects.toThrow(RangeError);
  });
});
