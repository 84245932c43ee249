import type { FairQueue } from '@requester/queue';
import { ClientWeights } from '@requester/queue';
import type { RequestEnvelopeInput } from '@requester/shared/contract';
import { encodeQueuedTask, queuePartition, taskId } from '@requester/shared/task';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from '../worker/harness.fixture.ts';
import { ClusterBulkhead } from './cluster.ts';

/**
 * One order at a saturated origin (docs/architecture.md §6), across two executors: both count the
 * origin's cap together in Redis (ORIGIN_CONCURRENCY_SCOPE=cluster), both lease from one queue,
 * and the calls reach one target, each 40 ms long, so the origin is the bottleneck. What is checked
 * is the order of the calls at the target, by counts, never a duration.
 */
describe('one order at a saturated origin (end to end, two executors)', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  /** Two executors on one queue, sharing the origin's `cap` slots; clients' weights from the queue. */
  async function twoExecutors(cap: number) {
    const queue = h.newQueue();
    const weights = new ClientWeights(queue);
    h.onClose(async () => weights.close());
    const prefix = h.prefix('order-bulkhead');
    const bulkhead = () =>
      new ClusterBulkhead({
        redis: h.redis,
        prefix,
        maxPerOrigin: cap,
        leaseMs: 30_000,
        weightOf: (client) => weights.weightOf(client),
      });
    h.startExecutor({ queue, maxWorkers: 8, bulkhead: bulkhead() });
    h.startExecutor({ queue, maxWorkers: 8, bulkhead: bulkhead() });
    return { queue, weights };
  }

  /**
   * Writes the requests to `in` and queues them as the router does, in their client's namespace
   * (so the lease shares them out by client, as in production).
   */
  async function submit(queue: FairQueue, envelopes: RequestEnvelopeInput[]): Promise<void> {
    const kafkaPartition = 0;
    const [meta] = await h.producer.send(
      h.inTopic,
      envelopes.map((e) => ({ partition: kafkaPartition, key: e.meta.requestId, value: JSON.stringify(e) })),
    );
    const base = BigInt(meta?.baseOffset ?? '0');
    await queue.publish(
      envelopes.map((e, i) => ({
        id: taskId(e.meta.client, e.meta.requestId, 0),
        partition: queuePartition(e.meta.client, e.meta.partition, e.meta.requestId),
        payload: encodeQueuedTask({
          ref: { topic: h.inTopic, partition: kafkaPartition, offset: String(base + BigInt(i)) },
          requestId: e.meta.requestId,
          tryCount: 0,
        }),
      })),
    );
  }

  const run = () => uniqueName('order');
  const request = (run: string, client: string, name: string, partition?: string): RequestEnvelopeInput => ({
    request: { uri: `${h.target.url}/slow/40?run=${run}&n=${name}` },
    meta: { requestId: `${run}-${name}`, client, ...(partition ? { partition } : {}) },
  });
  /** The calls of `run` at the target, in arrival order, by name. */
  const calls = (run: string) =>
    h.target.calls
      .filter((c) => c.path.includes(`run=${run}&`))
      .map((c) => new URL(c.path, 'http://t').searchParams.get('n') ?? '');

  it('weights 3 : 1 give 3 : 1 of the calls at an origin that serves 4 at a time', async () => {
    const { queue, weights } = await twoExecutors(4);
    await queue.setClientWeight('heavy', 3);
    // Read now rather than at the next refresh.
    await weights.refresh();
    const id = run();
    // Interleaved: the executors hold both clients' tasks alike, so the order is the origin's.
    const both = Array.from({ length: 150 }, (_, i) => [
      request(id, 'heavy', `h${i}`),
      request(id, 'light', `l${i}`),
    ]).flat();
    await submit(queue, both);
    const seen = await h.until(() => (calls(id).length >= 140 ? calls(id) : undefined));
    // After the first calls (taken before any wait formed), by counts: 3 : 1 is 90 of 120.
    const window = seen.slice(20, 140);
    const heavy = window.filter((n) => n.startsWith('h')).length;
    expect(heavy).toBeGreaterThanOrEqual(78);
    expect(heavy).toBeLessThanOrEqual(102);
  }, 120_000);

  it("serves the cold partitions before most of a hot partition's backlog at the same origin", async () => {
    const { queue } = await twoExecutors(2);
    const id = run();
    const hot = Array.from({ length: 60 }, (_, i) => request(id, 'A', `hot${i}`, 'hot'));
    await submit(queue, hot);
    // The hot backlog is leased and waiting at the origin before the cold partitions are queued.
    await h.until(() => (calls(id).length >= 2 ? true : undefined));
    const cold = Array.from({ length: 6 }, (_, i) => request(id, 'A', `cold${i}`, `cold-${i}`));
    await submit(queue, cold);
    const seen = await h.until(() =>
      calls(id).filter((n) => n.startsWith('cold')).length === cold.length ? calls(id) : undefined,
    );
    const lastCold = seen.findLastIndex((n) => n.startsWith('cold'));
    const hotBefore = seen.slice(0, lastCold).filter((n) => n.startsWith('hot')).length;
    expect(hotBefore).toBeLessThan(hot.length / 2);
  }, 120_000);

  it("serves a second client's few tasks before the first client's backlog drains", async () => {
    const { queue } = await twoExecutors(2);
    const id = run();
    const backlog = Array.from({ length: 80 }, (_, i) => request(id, 'A', `a${i}`));
    await submit(queue, backlog);
    await h.until(() => (calls(id).length >= 2 ? true : undefined));
    const few = Array.from({ length: 4 }, (_, i) => request(id, 'B', `b${i}`));
    await submit(queue, few);
    const seen = await h.until(() =>
      calls(id).filter((n) => n.startsWith('b')).length === few.length ? calls(id) : undefined,
    );
    const lastB = seen.findLastIndex((n) => n.startsWith('b'));
    const aBefore = seen.slice(0, lastB).filter((n) => n.startsWith('a')).length;
    expect(aBefore).toBeLessThan(backlog.length / 2);
  }, 120_000);
});
