import { RateLimiter } from '@requester/policies';
import type { RequestEnvelopeInput } from '@requester/shared/contract';
import { type Destination, parseDestinationSpec } from '@requester/shared/destinations';
import { startTarget, type TargetCall, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from './harness.fixture.ts';

/**
 * A caller's own lower rate beside its destination's quota (docs/architecture.md §10,
 * "Destinations"), through a real executor, queue, Kafka, Redis and a loopback target, judged by
 * arrival at the target. Sliding logs count every call of a window exactly; the bounds below
 * leave a margin of whole calls and a whole second, which only a broken limit can cross.
 */
describe('destination rate: a caller’s own limit beside the destination’s (end to end)', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);
  // Made before any test runs: a Lua command defined while ioredis auto-pipelines is missing from that pipeline.
  let limiter: RateLimiter;
  beforeAll(() => {
    limiter = new RateLimiter({ redis: h.redis, prefix: h.prefix('lim') });
  });

  /** The destinations the executor reads, by name, each at `perSecond` calls a second. */
  function catalog(base: string, perSecond: Record<string, number>) {
    const destinations = new Map<string, Destination>(
      Object.entries(perSecond).map(([name, value]) => [
        name,
        {
          name,
          version: 1,
          spec: parseDestinationSpec({
            baseUrl: base,
            limiter: { algorithm: 'sliding-window-log', rates: [{ duration: '1s', value }] },
          }),
        },
      ]),
    );
    return { current: async (name: string) => destinations.get(name) };
  }

  const calls = (client: string, destination: string, marker: string, n: number, perSecond?: number) =>
    Array.from(
      { length: n },
      (_, i): RequestEnvelopeInput => ({
        request: { uri: `/echo?${marker}=${i}` },
        meta: {
          requestId: uniqueName(marker),
          client,
          destination,
          ...(perSecond === undefined
            ? {}
            : {
                limiter: {
                  key: 'own',
                  algorithm: 'sliding-window-log',
                  rates: [{ duration: '1s', value: perSecond }],
                },
              }),
        },
      }),
    );

  /**
   * The most arrivals in any window of `ms` opening at an arrival. The target shares the test's
   * event loop, so arrivals are noted in bunches when it is busy: windows of two seconds, and a
   * margin of calls, leave room for that.
   */
  const busiest = (arrived: readonly TargetCall[], ms = 2_000) =>
    Math.max(...arrived.map((c) => arrived.filter((o) => o.at >= c.at && o.at < c.at + ms).length));

  const spanMs = (arrived: readonly TargetCall[]) =>
    Math.max(...arrived.map((c) => c.at)) - Math.min(...arrived.map((c) => c.at));

  async function allAnswered(envelopes: readonly RequestEnvelopeInput[]) {
    return Promise.all(envelopes.map((e) => h.resultOf(e.meta.requestId)));
  }

  it('a caller asking 2/s of a 10/s destination gets ≤ 2/s; another caller of it gets the rest', async () => {
    const partner = await startTarget();
    h.onClose(() => partner.close());
    const run = uniqueName('rate');
    const name = `partner-${run}`;
    const { queue } = h.startExecutor({ limiter, destinations: catalog(partner.url, { [name]: 10 }) });
    const slow = calls(`slow-${run}`, name, `s${run}`, 20, 2);
    const other = calls(`other-${run}`, name, `o${run}`, 30);
    await h.submit(queue, [...slow, ...other]);
    const slowResults = await allAnswered(slow);
    const otherResults = await allAnswered(other);
    for (const result of slowResults) {
      expect(result.response.status).toBe(200);
      expect(result.meta.destination).toEqual({ name, version: 1, limiters: ['caller', 'destination'] });
    }
    for (const result of otherResults)
      expect(result.meta.destination).toEqual({ name, version: 1, limiters: ['destination'] });

    const slowArrived = partner.calls.filter((c) => c.path.includes(`s${run}=`));
    const otherArrived = partner.calls.filter((c) => c.path.includes(`o${run}=`));
    expect(slowArrived).toHaveLength(20);
    expect(otherArrived).toHaveLength(30);
    // 2 a second: its 20 calls take at least 9 s from the first to the last (one second of
    // margin). Under the destination's 10/s alone, all 50 calls together take about 5 s.
    expect(spanMs(slowArrived)).toBeGreaterThanOrEqual(8_000);
    expect(busiest(slowArrived)).toBeLessThanOrEqual(2 * 2 + 2);
    // The destination's quota holds for both callers together.
    expect(busiest([...slowArrived, ...otherArrived])).toBeLessThanOrEqual(10 * 2 + 4);
    // The other caller had the rest of the quota: it made more calls than the slow one meanwhile.
    const slowLast = Math.max(...slowArrived.map((c) => c.at));
    expect(otherArrived.filter((c) => c.at <= slowLast).length).toBeGreaterThan(20);
  }, 120_000);

  it('a caller asking 50/s of a 10/s destination still gets ≤ 10/s', async () => {
    const partner = await startTarget();
    h.onClose(() => partner.close());
    const run = uniqueName('fast');
    const name = `partner-${run}`;
    const { queue } = h.startExecutor({ limiter, destinations: catalog(partner.url, { [name]: 10 }) });
    const fast = calls(`fast-${run}`, name, `f${run}`, 35, 50);
    await h.submit(queue, fast);
    await allAnswered(fast);
    const arrived = partner.calls.filter((c) => c.path.includes(`f${run}=`));
    expect(arrived).toHaveLength(35);
    expect(busiest(arrived)).toBeLessThanOrEqual(10 * 2 + 4);
    // 10 a second: calls 31 to 35 leave 3 s after the first ones at the earliest (one second of margin).
    expect(spanMs(arrived)).toBeGreaterThanOrEqual(2_000);
  }, 120_000);
});
