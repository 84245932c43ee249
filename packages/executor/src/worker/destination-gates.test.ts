import { CircuitBreaker, originOf } from '@requester/policies';
import type { RequestEnvelopeInput } from '@requester/shared/contract';
import {
  type Destination,
  destinationBreakerKey,
  parseDestinationSpec,
} from '@requester/shared/destinations';
import { registry } from '@requester/shared/metrics';
import { startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from './harness.fixture.ts';

/**
 * What a destination pins for the gates (docs/architecture.md §10, "Destinations"), through a real
 * executor, queue, Kafka, Redis and loopback targets: its own breaker with its thresholds, apart
 * from its origin's; its calls paced by the origin or not. Open periods and holds last a minute,
 * far beyond the test: a call let through where it should wait would show at the target.
 */
describe('destination gates: its breaker settings and pacing (end to end through the executor)', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  /** The destinations the executor reads, by name (the store's reads are tested in shared). */
  function catalog(specs: Record<string, unknown>) {
    const destinations = new Map<string, Destination>(
      Object.entries(specs).map(([name, spec]) => [
        name,
        { name, version: 1, spec: parseDestinationSpec(spec) },
      ]),
    );
    return {
      current: async (name: string) => destinations.get(name),
      /** A new version of `name`, as an operator's update writes it. */
      update(name: string, spec: unknown) {
        const version = (destinations.get(name)?.version ?? 0) + 1;
        destinations.set(name, { name, version, spec: parseDestinationSpec(spec) });
      },
    };
  }

  async function target(): Promise<Target> {
    const started = await startTarget();
    h.onClose(() => started.close());
    return started;
  }

  /** Tasks this process sent back to wait for an open breaker, so far. */
  const circuitOpenRefusals = async () => {
    const line = (await registry.metrics())
      .split('\n')
      .find((l) => l.startsWith('requester_executor_tasks_total{outcome="circuit_open"}'));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };

  const callsAt = (at: Target, marker: string) => at.calls.filter((c) => c.path.includes(marker));

  const to = (destination: string, uri: string): RequestEnvelopeInput => ({
    request: { uri },
    meta: { requestId: uniqueName(destination), destination },
  });

  /** The deployment's breaker: threshold 5, open a minute (far beyond a test), no local cache. */
  const deploymentBreaker = () =>
    new CircuitBreaker({
      redis: h.redis,
      prefix: h.prefix('breaker'),
      failureThreshold: 5,
      openMs: 60_000,
      stateCacheMs: 0,
    });

  it('a destination with a low failure threshold opens its own breaker; the origin’s, with the defaults, stays closed', async () => {
    const partner = await target();
    const breaker = deploymentBreaker();
    const run = uniqueName('brk');
    const strict = `strict-${run}`;
    const lenient = `lenient-${run}`;
    const { queue } = h.startExecutor({
      breaker,
      destinations: catalog({
        [strict]: { baseUrl: `${partner.url}/switch`, breaker: { failureThreshold: 2, openDuration: '1m' } },
        [lenient]: { baseUrl: `${partner.url}/switch` },
      }),
    });
    partner.switches.set(`${run}-s`, 503);
    partner.switches.set(`${run}-l`, 503);

    // Its breaker opens after 2 failures: the other calls wait (a minute), none reaches the target.
    const strictCalls = Array.from({ length: 6 }, (_, i) => to(strict, `/${run}-s?i=${i}`));
    await h.submit(queue, strictCalls);
    const key = destinationBreakerKey(strict);
    await h.until(async () => ((await breaker.snapshot(key, '')).state === 'open' ? true : undefined));
    await h.until(() => {
      const answered = strictCalls.filter((e) => h.results.has(e.meta.requestId));
      return answered.length === 2 ? answered : undefined;
    });

    // The same origin, its breaker's default threshold (5): 4 failures all reach the target.
    const lenientCalls = Array.from({ length: 4 }, (_, i) => to(lenient, `/${run}-l?i=${i}`));
    await h.submit(queue, lenientCalls);
    for (const sent of lenientCalls) {
      const result = await h.resultOf(sent.meta.requestId);
      expect(result.response.status).toBe(503);
      expect(result.meta.destination).toEqual({ name: lenient, version: 1 });
    }
    expect(callsAt(partner, `${run}-l`)).toHaveLength(4);
    const origin = originOf(partner.url);
    expect((await breaker.snapshot(origin, '')).state).toBe('closed');
    expect((await breaker.snapshot(origin)).state).toBe('closed');
    // The strict destination's breaker is still open: its waiting calls never left.
    expect(callsAt(partner, `${run}-s`)).toHaveLength(2);
    expect(strictCalls.filter((e) => h.results.has(e.meta.requestId))).toHaveLength(2);

    // Per-destination metrics: its calls by outcome, in this process's registry.
    const text = await registry.metrics();
    expect(text).toContain(
      `requester_executor_destination_calls_total{destination="${strict}",outcome="5xx"} 2`,
    );
    expect(text).toContain(
      `requester_executor_destination_calls_total{destination="${lenient}",outcome="5xx"} 4`,
    );
  }, 120_000);

  it('an update applies from the next attempt: breaker settings given later, the next call is judged by its own breaker', async () => {
    const partner = await target();
    const breaker = deploymentBreaker();
    const run = uniqueName('ver');
    const name = `ver-${run}`;
    const destinations = catalog({ [name]: { baseUrl: `${partner.url}/switch` } });
    const { queue } = h.startExecutor({ breaker, destinations });
    partner.switches.set(run, 503);
    const origin = originOf(partner.url);
    const first = to(name, `/${run}?i=1`);
    await h.submit(queue, [first]);
    expect((await h.resultOf(first.meta.requestId)).meta.destination).toEqual({ name, version: 1 });
    expect((await breaker.snapshot(origin, '')).failures).toBe(1);

    destinations.update(name, { baseUrl: `${partner.url}/switch`, breaker: { failureThreshold: 1 } });
    const second = to(name, `/${run}?i=2`);
    await h.submit(queue, [second]);
    expect((await h.resultOf(second.meta.requestId)).meta.destination).toEqual({ name, version: 2 });
    // Its own breaker counted the failure and opened (threshold 1); the origin's saw no more.
    expect((await breaker.snapshot(destinationBreakerKey(name), '')).state).toBe('open');
    expect((await breaker.snapshot(origin, '')).failures).toBe(1);
    const refusedBefore = await circuitOpenRefusals();
    const third = to(name, `/${run}?i=3`);
    await h.submit(queue, [third]);
    // Refused by its open breaker (open a minute): it waits, and never reaches the target.
    await h.until(async () => ((await circuitOpenRefusals()) > refusedBefore ? true : undefined));
    expect(callsAt(partner, run)).toHaveLength(2);
  }, 120_000);

  /**
   * An executor with the role's pacer, and two destinations on one fresh target: `on` (paced, the
   * default) and `off` (pacing off).
   */
  async function pacedPair(name: string) {
    const partner = await target();
    const pacer = h.pacer();
    const run = uniqueName(name);
    const [on, off] = [`on-${run}`, `off-${run}`];
    const { queue } = h.startExecutor({
      pacer,
      destinations: catalog({
        [on]: { baseUrl: partner.url },
        [off]: { baseUrl: partner.url, pacing: false },
      }),
    });
    return { partner, pacer, run, on, off, queue };
  }

  it('pacing on: a 429 + Retry-After holds the destination’s next calls; pacing off: its calls go through the hold', async () => {
    const { partner, pacer, run, on, off, queue } = await pacedPair('pace');
    const slowDown = to(on, `/status/429?retry-after=60&run=${run}`);
    await h.submit(queue, [slowDown]);
    expect((await h.resultOf(slowDown.meta.requestId)).response.status).toBe(429);
    const origin = originOf(partner.url);
    expect((await pacer.snapshot(origin)).holdUntilMs).toBeGreaterThan(Date.now());

    const held = to(on, `/echo?held=${run}`);
    await h.submit(queue, [held]);
    const through = to(off, `/echo?through=${run}`);
    await h.submit(queue, [through]);
    const result = await h.resultOf(through.meta.requestId);
    expect(result.response.status).toBe(200);
    expect(result.meta.tryCount).toBe(1);
    expect(result.meta.waitTime).toBe(0);
    // The paced destination's call waits for the hold's end, a minute away.
    expect(callsAt(partner, `held=${run}`)).toHaveLength(0);
    expect(h.results.has(held.meta.requestId)).toBe(false);
  }, 120_000);

  it('pacing off: its 429 + Retry-After teaches the origin’s pace nothing; a paced call goes at once', async () => {
    const { partner, pacer, run, on, off, queue } = await pacedPair('learn');
    const slowDown = to(off, `/status/429?retry-after=60&run=${run}`);
    await h.submit(queue, [slowDown]);
    expect((await h.resultOf(slowDown.meta.requestId)).response.status).toBe(429);
    expect((await pacer.snapshot(originOf(partner.url))).holdUntilMs).toBeUndefined();

    const next = to(on, `/echo?next=${run}`);
    await h.submit(queue, [next]);
    const result = await h.resultOf(next.meta.requestId);
    expect(result.response.status).toBe(200);
    expect(result.meta.waitTime).toBe(0);
  }, 120_000);
});
