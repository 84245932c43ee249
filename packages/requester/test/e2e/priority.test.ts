import type { KafkaProducer } from '@requester/shared';
import { startTarget, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskPage } from '../../src/ops/tasks/index.ts';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requesterInProcess } from '../cli.fixture.ts';
import {
  kafkaProducer,
  type ResultCollector,
  type StackEnv,
  stackKey,
  startStackUnderTest,
  stopStackUnderTest,
  until,
} from './stack.fixture.ts';

/**
 * Priority through the whole service (issue 45 item 1; the queue's own tests are in
 * packages/queue/src/index.test.ts): a client's backlog at -10 waits behind one worker held by the
 * target; its priority-10 requests, one by HTTP and one by Kafka, are the next calls to reach the
 * target once the worker frees, and an ordered partition with mixed priorities keeps its order.
 * Asserted by the order of arrival at the target, never by time.
 */
const BACKLOG = 30;
const ORDERED = [-10, 10, 0, 5];

describe('priority end to end: a client’s urgent requests pass its own backlog', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let producer: KafkaProducer;
  let client: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    target = await startTarget();
    // One worker, and no probe calls from the adaptive limit: the target sees the lease order. One
    // shard: priority ranks a client's partitions inside a shard; across shards it is a visit
    // order, best effort (docs/architecture.md, "Priority inside a client's share"): a borrowing
    // lease under way may serve another shard's low task first (2 runs in 5 with 8 shards).
    ({ stack, running, results } = await startStackUnderTest({
      MAX_WORKERS: '1',
      ADAPTIVE_CONCURRENCY: 'false',
      QUEUE_SHARDS: '1',
    }));
    producer = await kafkaProducer();
    client = await stackKey(stack, { kafkaEntry: true, admin: 'read' });
  }, 120_000);

  afterAll(async () => {
    target?.release('low');
    await producer?.disconnect();
    await stopStackUnderTest({ stack, running, results });
    await target?.close();
  }, 60_000);

  async function submit(envelope: Record<string, unknown>): Promise<void> {
    const res = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...client.headers, 'content-type': 'application/json' },
      body: JSON.stringify(envelope),
    });
    expect(res.status, await res.clone().text()).toBe(202);
  }

  /** The client's tasks in a state (`pending`: queued, not leased), by the admin API. */
  async function list(state: 'pending' | 'in-flight'): Promise<TaskPage['rows']> {
    const res = await fetch(`${stack.adminUrl}/admin/api/tasks/${state}?client=${client.name}&limit=100`, {
      headers: client.headers,
    });
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as TaskPage).rows;
  }

  it('priority 10 by HTTP and by Kafka is called before the -10 backlog; an ordered partition keeps its order', async () => {
    const low = Array.from({ length: BACKLOG }, (_, i) => `low-${i}`);
    await Promise.all(
      low.map((id) =>
        submit({
          request: { uri: `${target.url}/hold/low?id=${id}` },
          meta: { requestId: id, priority: -10 },
        }),
      ),
    );
    // Sent one after the other: the partition's order is the order of acceptance.
    const ordered = ORDERED.map((_, i) => `ord-${i}`);
    for (const [i, id] of ordered.entries())
      await submit({
        request: { uri: `${target.url}/hold/low?id=${id}` },
        meta: { requestId: id, partition: '!mixed', priority: ORDERED[i] },
      });
    await until('one backlog call held, the rest queued', async () =>
      target.holding('low') >= 1 && (await list('pending')).length >= BACKLOG - 1 ? true : undefined,
    );

    await submit({
      request: { uri: `${target.url}/echo?id=high-http` },
      meta: { requestId: 'high-http', priority: 10 },
    });
    await producer.send(stack.config.topicIn, [
      {
        key: 'high-kafka',
        value: JSON.stringify({
          request: { uri: `${target.url}/echo?id=high-kafka` },
          meta: { requestId: 'high-kafka', priority: 10, client: client.name },
        }),
      },
    ]);
    // Accepted: both in the queue while the worker is still held, so what follows is the lease
    // order. The executor may have leased them already (it holds a few leases per worker).
    const rows = await until('both urgent requests queued', async () => {
      const now = [...(await list('pending')), ...(await list('in-flight'))];
      const ids = new Set(now.map((r) => r.requestId));
      return ids.has('high-http') && ids.has('high-kafka') ? now : undefined;
    });
    expect(Object.fromEntries(rows.map((r) => [r.requestId, r.priority]))).toMatchObject({
      'high-http': 10,
      'high-kafka': 10,
      'low-29': -10,
    });
    // The operator's lists show the priority: the CLI's table (pending, then in flight: a task moves
    // only that way while the worker is held) and the Tasks page.
    for (const id of ['high-http', 'low-29']) {
      let printed = '';
      for (const state of ['pending', 'in-flight']) {
        const table = await requesterInProcess(
          ['tasks', state, '--client', client.name, '--partition', `#${id}`],
          stack.env,
        );
        expect(table.code, table.stderr).toBe(0);
        printed += table.stdout;
      }
      expect(printed).toMatch(/PRIORITY/);
      expect(printed).toMatch(new RegExp(`${id} .* ${id === 'low-29' ? -10 : 10} `));
    }
    const page = await fetch(`${stack.adminUrl}/ui/tasks?state=pending&client=${client.name}`, {
      headers: client.headers,
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('priority');

    // The executor holds up to HELD_PER_WORKER leases per worker: those taken before the urgent
    // requests were queued run first; no task of lower priority still queued then may be called
    // before them (ord-1, at 10 too, may: its partition became ready before them).
    const leasedThen = new Set((await list('in-flight')).map((r) => r.requestId));
    const before = target.calls.length;
    target.release('low');
    await results.until(
      () => [...low, ...ordered, 'high-http', 'high-kafka'].every((id) => results.byId.has(id)),
      60_000,
      'every result',
    );
    const idOf = (call: { path: string }) => new URL(call.path, 'http://target').searchParams.get('id');
    const after = target.calls.slice(before).map(idOf);
    const last = Math.max(after.indexOf('high-http'), after.indexOf('high-kafka'));
    const priorityOf = (id: string | null) =>
      id?.startsWith('ord-') ? (ORDERED[Number(id.slice(4))] ?? 0) : id?.startsWith('high-') ? 10 : -10;
    const passed = after.slice(0, last).filter((id) => priorityOf(id) < 10 && !leasedThen.has(id));
    expect(passed, `leased then: ${[...leasedThen].join(' ')}; calls: ${after.join(' ')}`).toEqual([]);
    // So both are among the first few of the 35 calls left: the held leases, ord-1, each other.
    expect(last).toBeLessThanOrEqual(leasedThen.size + 1);
    const all = target.calls.map(idOf);
    expect(all.filter((id) => id?.startsWith('ord-'))).toEqual(ordered);
    for (const id of [...low, ...ordered, 'high-http', 'high-kafka'])
      expect(results.byId.get(id)?.[0]?.response.status, id).toBe(200);
  }, 90_000);
});
