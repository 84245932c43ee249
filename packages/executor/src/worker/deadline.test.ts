import type { Journal, JournalEventInput } from '@requester/shared/journal';
import { registry } from '@requester/shared/metrics';
import { eventually } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from './harness.fixture.ts';

/**
 * The start-by deadline (`meta.deadline`, docs/architecture.md §4): a task whose turn comes after
 * it, or whose next attempt would start after it, ends with one `expired` result and no further
 * call, counted and journaled. Over the real Kafka and Redis and a real target.
 */
describe('start-by deadline', () => {
  const h = new ExecutorHarness();
  const events: JournalEventInput[] = [];
  const journal: Journal = { emit: (event) => void events.push(event), close: async () => {} };
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  async function expiredCount(stage: string): Promise<number> {
    const metrics = await registry.getMetricsAsJSON();
    const expired = metrics.find((m) => m.name === 'requester_executor_expired_total');
    const values = (expired?.values ?? []) as Array<{ value: number; labels: Record<string, unknown> }>;
    return values.find((v) => v.labels.stage === stage)?.value ?? 0;
  }

  it('a task whose turn comes after its deadline ends expired, uncalled; one before it runs', async () => {
    const { queue } = h.startExecutor({ journal });
    const before = await expiredCount('queued');
    const head = {
      request: { uri: `${h.target.url}/hold/dl-head` },
      meta: {
        requestId: 'dl-head',
        partition: '!dl',
        deadline: new Date(Date.now() + 3_600_000).toISOString(),
      },
    };
    const deadline = Date.now() + 300;
    const behind = {
      request: { uri: `${h.target.url}/echo?n=dl-behind` },
      meta: { requestId: 'dl-behind', partition: '!dl', deadline: new Date(deadline).toISOString() },
    };
    await h.submit(queue, [head, behind]);
    await h.until(() => (h.target.holding('dl-head') > 0 ? true : undefined));
    // The ordered partition's head holds its successor past the successor's deadline.
    await eventually(() => Date.now() > deadline, 10_000, 'the deadline passed');
    h.target.release('dl-head');
    expect((await h.resultOf('dl-head')).response.status).toBe(200);
    const result = await h.resultOf('dl-behind');
    expect(result.response.status).toBe(504);
    expect(result.meta).toMatchObject({ tryCount: 0, error: { code: 'expired' } });
    expect(result.meta.error?.message).toContain(new Date(deadline).toISOString());
    expect(h.callsWith('n=dl-behind')).toEqual([]);
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'expired', requestId: 'dl-behind', stage: 'queued', deadline }),
    );
    expect(await expiredCount('queued')).toBe(before + 1);
  });

  it('a retry whose pause would end after the deadline ends expired instead, after one attempt', async () => {
    const { queue } = h.startExecutor({ journal });
    const before = await expiredCount('retry');
    const envelope = {
      request: { uri: `${h.target.url}/status/503?n=dl-retry` },
      meta: {
        requestId: 'dl-retry',
        deadline: new Date(Date.now() + 60_000).toISOString(),
        retry: { max: 5, delay: '10m', maxDelay: '1h', jitter: 0 },
      },
    };
    await h.submit(queue, [envelope]);
    const result = await h.resultOf('dl-retry');
    expect(result.response.status).toBe(504);
    expect(result.meta).toMatchObject({ tryCount: 1, error: { code: 'expired' } });
    expect(h.callsWith('n=dl-retry')).toHaveLength(1);
    expect(h.deadLetters.get('dl-retry')).toBeUndefined();
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'expired', requestId: 'dl-retry', stage: 'retry', tryCount: 1 }),
    );
    expect(await expiredCount('retry')).toBe(before + 1);
  });
});
