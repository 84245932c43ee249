import { type LimitDecision, type LimitRequest, RateLimiter } from '@requester/policies';
import type { FairQueue } from '@requester/queue';
import type { RequestEnvelopeInput } from '@requester/shared/contract';
import { eventually, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from '../../../executor/src/worker/harness.fixture.ts';

/** A limiter that counts its denials, so that the test knows when a task is held by the quota. */
class WatchedLimiter extends RateLimiter {
  limited = 0;

  override async takeMany(requests: readonly LimitRequest[]): Promise<LimitDecision[]> {
    const decisions = await super.takeMany(requests);
    this.limited += decisions.filter((d) => d.outcome === 'limited').length;
    return decisions;
  }
}

/**
 * A calendar quota through the executor, over the real Kafka, Redis and PostgreSQL and a real HTTP
 * target, across a month boundary: the test holds the limiter's clock on the last second of
 * February until the quota has held a task back, then moves it to March.
 */
describe('calendar quota through the executor', () => {
  const h = new ExecutorHarness();
  let queue: FairQueue;
  let nowMs = Date.parse('2027-02-28T23:59:59.000Z');
  let limiter: WatchedLimiter;

  beforeAll(async () => {
    await h.open();
    limiter = new WatchedLimiter({ redis: h.redis, prefix: h.prefix('lim'), clock: () => nowMs });
    ({ queue } = h.startExecutor({ maxWorkers: 4, limiter }));
  }, 60_000);
  afterAll(() => h.close(), 60_000);

  it('spends the month’s units (cost counted); the request past them waits for the reset, no attempt spent', async () => {
    const run = uniqueName('quota');
    // 5 units a month: calls of cost 3, 1 and 1 fill February; the fourth waits for March.
    const calls: RequestEnvelopeInput[] = [3, 1, 1, 1].map((cost, i) => ({
      request: { uri: `${h.target.url}/echo?run=${run}&n=${i}` },
      meta: {
        requestId: `${run}-${i}`,
        partition: `!${run}`, // in order, so the fourth is the one past the quota
        limiter: { key: run, algorithm: 'token-bucket', quota: { value: 5, period: 'month' }, cost },
      },
    }));
    await h.submit(queue, calls);
    const february = await Promise.all(calls.slice(0, 3).map((c) => h.resultOf(c.meta.requestId)));
    expect(february.map((r) => [r.response.status, r.meta.waitTime])).toEqual([
      [200, 0],
      [200, 0],
      [200, 0],
    ]);
    await eventually(async () => limiter.limited > 0, 20_000, 'the quota holding the fourth call back');
    expect(h.callsWith(`run=${run}&`)).toHaveLength(3);

    nowMs = Date.parse('2027-03-01T00:00:00.000Z');
    const march = await h.resultOf(calls[3]!.meta.requestId);
    expect(march.response.status).toBe(200);
    expect(march.meta.tryCount).toBe(1); // a wait is not an attempt
    expect(march.meta.waitTime).toBeGreaterThan(0);
    expect(h.callsWith(`run=${run}&`)).toHaveLength(4);
  });
});
