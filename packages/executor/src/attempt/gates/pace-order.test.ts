import { setTimeout as sleep } from 'node:timers/promises';
import { OriginPacer } from '@requester/policies';
import type { FairQueue } from '@requester/queue';
import { ClientWeights } from '@requester/queue';
import type { RequestEnvelopeInput } from '@requester/shared/contract';
import { encodeQueuedTask, queuePartition, taskId } from '@requester/shared/task';
import { type RemotePacedTarget, startPacedTargetProcess, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from '../../worker/harness.fixture.ts';

/**
 * One order at a paced origin (docs/architecture.md §9, "whose turn"), across two executors: both
 * pace one target that serves 50 calls/s (5 per 100 ms, counted by arrival, 429 + Retry-After
 * above it) through one Redis, and lease from one queue. What is checked is the order of the calls
 * the target served, by counts, never a duration.
 */
describe('one order at a paced origin (end to end, two executors)', () => {
  const h = new ExecutorHarness();
  let quota: RemotePacedTarget;
  const pacers: OriginPacer[] = [];

  beforeAll(async () => {
    await h.open();
    quota = await startPacedTargetProcess({ kind: 'quota', perWindow: 5, windowMs: 100, retryAfterS: 1 });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(pacers.map((pacer) => pacer.close()));
    await quota.close();
    await h.close();
  }, 60_000);

  /** Two executors on one queue, each with its own pacer on one Redis; clients' weights from the queue. */
  async function twoExecutors() {
    const queue = h.newQueue();
    const weights = new ClientWeights(queue);
    h.onClose(async () => weights.close());
    const prefix = h.prefix('pace-order');
    const pacer = () => {
      const made = new OriginPacer({
        redis: h.redis,
        prefix,
        maxLimit: 16,
        retryAfterMaxMs: 60_000,
        weightOf: (client) => weights.weightOf(client),
      });
      pacers.push(made);
      return made;
    };
    h.startExecutor({ queue, maxWorkers: 8, pacer: pacer() });
    h.startExecutor({ queue, maxWorkers: 8, pacer: pacer() });
    return { queue, weights };
  }

  /** Writes the requests to `in` and queues them as the router does, in their client's namespace. */
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

  const retry = { max: 30, delay: '200ms', maxDelay: '5s' };
  const request = (run: string, client: string, name: string): RequestEnvelopeInput => ({
    request: { uri: `${quota.url}/o?run=${run}&n=${name}` },
    meta: { requestId: `${run}-${name}`, client, retry },
  });
  /** Resolves with what `check()` finds, asked again every 50 ms (bounded by the test timeout). */
  async function until<T>(check: () => Promise<T | undefined>): Promise<T> {
    for (;;) {
      const found = await check();
      if (found !== undefined) return found;
      await sleep(50);
    }
  }

  /** The calls of `run` the target served, in arrival order, by name. */
  const served = async (run: string) =>
    (await quota.arrivals())
      .filter((a) => a.status === 200 && a.path.includes(`run=${run}&`))
      .map((a) => new URL(a.path, 'http://t').searchParams.get('n') ?? '');

  it("serves a second client's few calls before the first client's paced backlog drains", async () => {
    const { queue } = await twoExecutors();
    const id = uniqueName('paced-few');
    const backlog = Array.from({ length: 300 }, (_, i) => request(id, 'A', `a${i}`));
    await submit(queue, backlog);
    // Paced by then, A's backlog waiting down its return lane (see gate-1.lua).
    await until(async () => ((await served(id)).length >= 30 ? true : undefined));
    const few = Array.from({ length: 10 }, (_, i) => request(id, 'B', `b${i}`));
    // What A had been served when B came: A's calls after it are what B waited for.
    const before = (await served(id)).length;
    await submit(queue, few);
    const seen = await until(async () => {
      const now = await served(id);
      return now.filter((n) => n.startsWith('b')).length === few.length ? now : undefined;
    });
    const firstB = seen.findIndex((n) => n.startsWith('b'));
    const lastB = seen.findLastIndex((n) => n.startsWith('b'));
    const aBetween = seen.slice(before, lastB).filter((n) => n.startsWith('a')).length;
    // Served first come, B's calls went after the whole rest of the backlog (all of it down the
    // one lane before them); in turns, after some of A's returns booked before B came and about
    // as many of A's calls as B's own (1 : 1 weights). Half of A's rest is the line between.
    expect(aBetween).toBeLessThan((backlog.length - before) / 2);
    expect(firstB).toBeGreaterThan(0);
    await until(async () => ((await served(id)).length === backlog.length + few.length ? true : undefined));
  }, 120_000);

  it('weights 3 : 1 give 3 : 1 of the paced calls', async () => {
    const { queue, weights } = await twoExecutors();
    await queue.setClientWeight('heavy', 3);
    await weights.refresh();
    const id = uniqueName('paced-weights');
    const both = Array.from({ length: 150 }, (_, i) => [
      request(id, 'heavy', `h${i}`),
      request(id, 'light', `l${i}`),
    ]).flat();
    await submit(queue, both);
    const seen = await until(async () => {
      const now = await served(id);
      return now.length >= 140 ? now : undefined;
    });
    // After the first calls (before the origin was paced), by counts: 3 : 1 ± 15 % is 78–102 of 120.
    const window = seen.slice(20, 140);
    const heavy = window.filter((n) => n.startsWith('h')).length;
    expect(heavy).toBeGreaterThanOrEqual(78);
    expect(heavy).toBeLessThanOrEqual(102);
  }, 120_000);
});
