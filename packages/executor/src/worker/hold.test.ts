import { CircuitBreaker, originOf } from '@requester/policies';
import type { RequestEnvelopeInput, ResultEnvelope } from '@requester/shared/contract';
import type { Journal, JournalEventInput } from '@requester/shared/journal';
import { registry } from '@requester/shared/metrics';
import { startTarget, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from './harness.fixture.ts';

/**
 * Held origins through a real executor, queue, Kafka and loopback targets (docs/architecture.md
 * §9 "Held origins"): a target that keeps failing is held back after the bound — its tasks wait
 * without spending attempts while one probe per period checks it — and resumes when it is back;
 * a receiver's `webhook-delivery: disable` holds its origin until an operator resets it.
 */
describe('held origins (end to end through the executor)', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  const resultsOf = (envelopes: RequestEnvelopeInput[]) =>
    Promise.all(envelopes.map((e) => h.resultOf(e.meta.requestId)));

  function recordingJournal(): Journal & { events: JournalEventInput[] } {
    const events: JournalEventInput[] = [];
    return { events, emit: (event) => void events.push(event), close: async () => {} };
  }

  async function leases(): Promise<number> {
    const metric = (await registry.getMetricsAsJSON()).find(
      (m) => m.name === 'requester_executor_leases_total',
    );
    return Number(metric?.values[0]?.value ?? 0);
  }

  it('holds a target that keeps failing: no attempt spent, one probe per period, then every held task completes; another origin flows', async () => {
    const PERIOD_MS = 1_000;
    const TASKS = 60;
    const dead = await startTarget();
    h.onClose(() => dead.close());
    const breaker = new CircuitBreaker({
      redis: h.redis,
      prefix: h.prefix('hold'),
      failureThreshold: 3,
      openMs: 100,
      maxOpenMs: 200,
      stateCacheMs: 100,
      busyRetryMs: 50,
      holdFailures: 6,
      holdPeriodMs: PERIOD_MS,
    });
    const journal = recordingJournal();
    const { queue } = h.startExecutor({ maxWorkers: 16, breaker, journal });
    const run = uniqueName('hold');
    dead.switches.set(run, 503);
    const doomed = Array.from({ length: TASKS }, (_, i) => ({
      request: { uri: `${dead.url}/switch/${run}?i=${i}` },
      meta: { requestId: `${run}-${i}`, retry: { max: 5, delay: '20ms' } },
    }));
    const healthy = Array.from({ length: 20 }, (_, i) => ({
      request: { uri: `${h.target.url}/echo?run=${run}&i=${i}` },
      meta: { requestId: `${run}-ok-${i}` },
    }));
    const leasesBefore = await leases();
    await h.submit(queue, doomed);

    // The bound: 6 failures in a row (3 calls, then probes) hold the origin, said once on `events`.
    const began = await h.until(() => journal.events.find((e) => e.type === 'origin_failing'));
    expect(began).toMatchObject({ origin: originOf(dead.url), reason: 'failing', failures: 6 });
    const callsAtHold = dead.calls.length;
    const leasesAtHold = await leases();
    expect(callsAtHold).toBeGreaterThanOrEqual(6);

    // Held: another origin is not.
    await h.submit(queue, healthy);
    const fine = await resultsOf(healthy);
    expect(fine.map((r) => [r.response.status, r.meta.tryCount])).toEqual(fine.map(() => [200, 1]));
    expect((await breaker.snapshot(originOf(h.target.url))).held).toBeUndefined();

    // While held, the only calls are probes, one per period at most, each on a task that waits on.
    const heldFrom = Number(began.since);
    await h.until(() => (dead.calls.length >= callsAtHold + 3 ? true : undefined));
    const heldMs = Date.now() - heldFrom; // the probes come on a grid of periods from the hold's start
    const probes = dead.calls.length - callsAtHold;
    expect(probes).toBeLessThanOrEqual(Math.ceil(heldMs / PERIOD_MS) + 2);
    // Only this (anonymous) caller's calls failed: its own breaker at the origin is the one held.
    expect(await breaker.snapshot(originOf(dead.url), '')).toMatchObject({
      held: 'failing',
      state: expect.any(String),
    });
    expect(h.results.size).toBe(healthy.length); // none of the doomed tasks ended

    // Held tasks wait for the next probe instant, not a busy retry: about one lease per period each.
    const heldLeases = (await leases()) - leasesAtHold - healthy.length;
    const periods = Math.ceil((Date.now() - Number(began.since)) / PERIOD_MS);
    console.info(`while held: ${(heldLeases / TASKS).toFixed(2)} leases per task over ${periods} periods`);
    expect(heldLeases / TASKS).toBeLessThanOrEqual(periods + 2);
    dead.switches.delete(run); // the target is back
    const results = await resultsOf(doomed);
    expect(results.map((r) => r.response.status)).toEqual(results.map(() => 200));
    const recovered = journal.events.find((e) => e.type === 'origin_recovered');
    expect(recovered).toMatchObject({ origin: originOf(dead.url) });
    expect((await breaker.snapshot(originOf(dead.url), '')).held).toBeUndefined();

    // A failed probe is no attempt: the attempts the results count are the calls minus those probes.
    const failedProbes = journal.events.filter(
      (e) => e.type === 'attempt' && e.probe === true && e.status === 503,
    ).length;
    expect(failedProbes).toBeGreaterThanOrEqual(2);
    const attempts = results.reduce((sum, r: ResultEnvelope) => sum + r.meta.tryCount, 0);
    expect(attempts).toBe(dead.calls.length - failedProbes);
    expect(h.deadLetters.size).toBe(0);
    for (const e of doomed) expect(h.results.get(e.meta.requestId)).toHaveLength(1);

    const total = ((await leases()) - leasesBefore - healthy.length) / TASKS;
    console.info(
      `in all: ${total.toFixed(2)} leases per task (the breaker's open periods before the hold included)`,
    );
  }, 120_000);

  it("honours a receiver's `webhook-delivery: disable`: its origin is held, nobody probes, until reset", async () => {
    const PERIOD_MS = 500;
    const receiver = await startTarget();
    h.onClose(() => receiver.close());
    const breaker = new CircuitBreaker({
      redis: h.redis,
      prefix: h.prefix('optout'),
      failureThreshold: 3,
      openMs: 100,
      stateCacheMs: 100,
      holdPeriodMs: PERIOD_MS,
    });
    const journal = recordingJournal();
    const { queue } = h.startExecutor({ breaker, journal, optOut: true });
    const run = uniqueName('optout');
    const first = {
      request: { uri: `${receiver.url}/echo?run=${run}&webhook-delivery=disable` },
      meta: { requestId: `${run}-first` },
    };
    await h.submit(queue, [first]);
    expect((await h.resultOf(first.meta.requestId)).response.status).toBe(200); // its answer stands
    expect(journal.events.find((e) => e.type === 'origin_failing')).toMatchObject({
      origin: originOf(receiver.url),
      reason: 'opt_out',
    });

    const later = Array.from({ length: 5 }, (_, i) => ({
      request: { uri: `${receiver.url}/echo?run=${run}&i=${i}` },
      meta: { requestId: `${run}-later-${i}` },
    }));
    await h.submit(queue, later);
    // Each comes back a few periods, each time held, and never reaches the receiver.
    await h.until(() => {
      const held = later.map(
        (e) =>
          journal.events.filter(
            (j) => j.type === 'held' && j.by === 'hold' && j.requestId === e.meta.requestId,
          ).length,
      );
      return held.every((n) => n >= 2) ? true : undefined;
    });
    expect(receiver.calls.length).toBe(1);
    expect((await breaker.heldOrigins()).map((o) => o.reason)).toEqual(['opt_out']);

    expect(await breaker.reset(originOf(receiver.url))).toBe(true); // the operator resumes it
    const results = await resultsOf(later);
    expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual(results.map(() => [200, 1]));
    expect(receiver.calls.length).toBe(1 + later.length);
  }, 120_000);

  it('ignores the header with ORIGIN_OPT_OUT=false', async () => {
    const receiver = await startTarget();
    h.onClose(() => receiver.close());
    const breaker = new CircuitBreaker({
      redis: h.redis,
      prefix: h.prefix('optout-off'),
      failureThreshold: 3,
      openMs: 100,
      stateCacheMs: 0,
    });
    const { queue } = h.startExecutor({ breaker, optOut: false });
    const run = uniqueName('optout-off');
    const envelopes = Array.from({ length: 3 }, (_, i) => ({
      request: { uri: `${receiver.url}/echo?run=${run}&i=${i}&webhook-delivery=disable` },
      meta: { requestId: `${run}-${i}` },
    }));
    await h.submit(queue, envelopes);
    const results = await resultsOf(envelopes);
    expect(results.map((r) => r.response.status)).toEqual([200, 200, 200]);
    expect(receiver.calls.length).toBe(3);
    expect((await breaker.snapshot(originOf(receiver.url))).held).toBeUndefined();
  }, 60_000);
});
