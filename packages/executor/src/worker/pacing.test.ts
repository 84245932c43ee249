import { setTimeout as sleep } from 'node:timers/promises';
import { CircuitBreaker, OriginPacer, originOf } from '@requester/policies';
import { registry } from '@requester/shared/metrics';
import { type RemotePacedTarget, startPacedTargetProcess, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalBulkhead } from '../bulkhead/index.ts';
import { ExecutorHarness } from './harness.fixture.ts';

/**
 * Origin pacing through two executors sharing one queue and one Redis (docs/architecture.md §9):
 * a target that serves 50 calls/s (5 per 100 ms, counted by arrival) and answers 429 +
 * Retry-After above it. Assertions are on counts and order at the real target, never on timings.
 */
describe('origin pacing (end to end, two executors)', () => {
  const h = new ExecutorHarness();
  let quota: RemotePacedTarget;
  let silent: RemotePacedTarget;

  beforeAll(async () => {
    await h.open();
    quota = await startPacedTargetProcess({ kind: 'quota', perWindow: 5, windowMs: 100, retryAfterS: 1 });
    // The same quota, but all it says is 429 + Retry-After: the pace is learnt from the rate served.
    silent = await startPacedTargetProcess({
      kind: 'quota',
      perWindow: 5,
      windowMs: 100,
      retryAfterS: 1,
      advertise: false,
    });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(pacers.map((pacer) => pacer.close()));
    await quota.close();
    await silent.close();
    await h.close();
  }, 60_000);

  /** Pacers with a subscriber connection of their own, closed at the end. */
  const pacers: OriginPacer[] = [];
  function listening(pacer: OriginPacer): OriginPacer {
    pacers.push(pacer);
    return pacer;
  }

  /** Two executors on one queue with the role's policy modules, each its own Redis-shared pacer and breaker. */
  function startTwo() {
    const paceKeys = h.prefix('pace');
    const breakerKeys = h.prefix('breaker');
    const modules = () => ({
      // As the executor role builds it: calls to a free origin leave without a gate.
      pacer: listening(
        new OriginPacer({
          redis: h.redis,
          prefix: paceKeys,
          maxLimit: 16,
          retryAfterMaxMs: 60_000,
          freeForMs: 1_000,
        }),
      ),
      breaker: new CircuitBreaker({
        redis: h.redis,
        prefix: breakerKeys,
        failureThreshold: 5,
        openMs: 30_000,
        stateCacheMs: 1_000,
      }),
      bulkhead: new LocalBulkhead({ maxPerOrigin: 16 }),
      maxWorkers: 16,
    });
    const first = h.startExecutor(modules());
    h.startExecutor({ ...modules(), queue: first.queue });
    return { queue: first.queue, breaker: modules().breaker };
  }

  /** Calls of this process woken well past their pacing slot, which asked the gate again. */
  async function lateWakeUps(): Promise<number> {
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'requester_pacing_waits_total');
    return Number(metric?.values.find((v) => v.labels.where === 'late')?.value ?? 0);
  }

  async function counter(name: string): Promise<number> {
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
    return (metric?.values ?? []).reduce((sum, v) => sum + Number(v.value), 0);
  }

  it('converges on a target that asks for 50/s: every request ends 200, few 429s, no breaker open, a healthy origin unaffected', async () => {
    const { queue, breaker } = startTwo();
    const run = uniqueName('pace');
    const retry = { max: 30, delay: '200ms', maxDelay: '5s' };
    const paced = Array.from({ length: 200 }, (_, i) => ({
      request: { uri: `${quota.url}/p?run=${run}&n=${i}` },
      meta: { requestId: `${run}-p-${i}`, retry },
    }));
    const healthy = Array.from({ length: 40 }, (_, i) => ({
      request: { uri: `${h.target.url}/echo?run=${run}&n=${i}` },
      meta: { requestId: `${run}-h-${i}`, retry },
    }));
    // The healthy origin known to the breaker first (a new origin gets a few trial calls at once).
    await h.submit(queue, healthy.slice(0, 1));
    await h.resultOf(healthy[0]?.meta.requestId ?? '');
    const leasesBefore = await counter('requester_executor_leases_total');
    await h.submit(queue, [...paced, ...healthy.slice(1, 20)]);
    await h.submit(queue, healthy.slice(20));

    const results = await Promise.all([...paced, ...healthy].map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => r.response.status)).toEqual(results.map(() => 200));
    const mine = (await quota.arrivals()).filter((a) => a.path.includes(`run=${run}&`));
    const served = mine.filter((a) => a.status === 200).length;
    const refused = mine.filter((a) => a.status === 429).length;
    expect(served).toBe(200);
    expect(refused).toBeLessThanOrEqual(served / 10);
    expect((await breaker.snapshot(originOf(quota.url))).state).toBe('closed');
    // The healthy origin, served by the same executors meanwhile: one attempt each, never held.
    const healthyResults = results.slice(paced.length);
    expect(healthyResults.every((r) => r.meta.tryCount === 1 && r.meta.waitTime === 0)).toBe(true);
    const leases = (await counter('requester_executor_leases_total')) - leasesBefore;
    // Tasks sent back to wait come back at their reserved slots: a few leases per request (sent
    // back, called; a retry after a 429), not the thousands of an open breaker spun on.
    expect(leases / results.length).toBeLessThan(5);
  }, 120_000);

  it('learns the pace of a target that says only 429 + Retry-After: every request ends 200, and once its first burst is answered, ≤ 5 % of calls are refused', async () => {
    const { queue, breaker } = startTwo();
    const run = uniqueName('silent');
    const retry = { max: 30, delay: '200ms', maxDelay: '5s' };
    const requests = Array.from({ length: 200 }, (_, i) => ({
      request: { uri: `${silent.url}/s?run=${run}&n=${i}` },
      meta: { requestId: `${run}-${i}`, retry },
    }));
    await h.submit(queue, requests);
    const results = await Promise.all(requests.map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => r.response.status)).toEqual(results.map(() => 200));
    const mine = (await silent.arrivals()).filter((a) => a.path.includes(`run=${run}&`));
    // Unpaced, 32 workers send ~4× what it serves at first: that burst is refused (and sets the
    // pace, from what was served). Once the hold of its first 429 (Retry-After: 1 s) is over, the
    // pace is learnt from the rate served (not from the rate sent, 5× too high): only its upward
    // probes are refused. The burst is told apart by time, not by its first call served after a
    // 429: on a loaded box its calls straddle the target's windows, so the next window serves a
    // few of them and its later ones are refused, still part of the burst.
    const firstRefused = mine.find((a) => a.status === 429);
    expect(firstRefused).toBeDefined();
    const holdEnds = (firstRefused?.at ?? 0) + 1_000;
    const converged = mine.slice(mine.findIndex((a) => a.at >= holdEnds));
    const refusedAfter = converged.filter((a) => a.status === 429);
    expect(converged.length).toBeGreaterThan(100);
    expect(refusedAfter.length).toBeLessThanOrEqual(converged.length * 0.05);
    // Each refusal holds the origin for a second; what one hold refuses arrives within it. A pace
    // cut from the rate sent steps down hold by hold (~220 → 150 → 110 → 75 → 55/s: 8–10 holds in
    // this run); one learnt from the rate served is held only at its upward probes.
    const holds = refusedAfter.filter((a, i) => i === 0 || a.at - (refusedAfter[i - 1]?.at ?? 0) > 500);
    expect(holds.length).toBeLessThanOrEqual(3);
    expect((await breaker.snapshot(originOf(silent.url))).state).toBe('closed');
  }, 120_000);

  it('parks a task whose slot is a few seconds ahead: leased once, holding no worker (another origin is served meanwhile)', async () => {
    // The origin asked for a pause of 6 s, then 10 calls/s: its calls get slots from 6 s on.
    const pacer = await pausedPacer(6);
    const { queue, leased } = countingQueue();
    // One worker: a task asleep in it until its slot would keep the other origin waiting.
    h.startExecutor({ queue, pacer, maxWorkers: 1 });
    const run = uniqueName('park');
    const paced = Array.from({ length: 3 }, (_, i) => ({
      request: { uri: `${quota.url}/park?run=${run}&n=${i}` },
      meta: { requestId: `${run}-p-${i}` },
    }));
    const other = {
      request: { uri: `${h.target.url}/echo?run=${run}` },
      meta: { requestId: `${run}-other` },
    };
    await h.submit(queue, paced);
    await h.submit(queue, [other]);

    await h.resultOf(other.meta.requestId);
    expect(paced.filter((e) => h.results.has(e.meta.requestId))).toEqual([]);
    const results = await Promise.all(paced.map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual(paced.map(() => [200, 1]));
    expect(results.every((r) => r.meta.waitTime > 0)).toBe(true);
    // Waited in the executor, not in the queue: one lease each.
    expect(paced.map((e) => leased.get(e.meta.requestId))).toEqual(paced.map(() => 1));
  }, 60_000);

  /** A pacer whose origin asked for a pause of `pauseS`, then 10 calls/s: slots from `pauseS` on. */
  async function pausedPacer(pauseS: number) {
    const pacer = new OriginPacer({
      redis: h.redis,
      prefix: h.prefix('pace'),
      maxLimit: 16,
      retryAfterMaxMs: 60_000,
      // Not 0: a task back from the queue a few ms after its slot would be late, and booked again.
      maxLocalWaitMs: 250,
    });
    const tooMany = { 'retry-after': String(pauseS), 'ratelimit-policy': '10;w=1' };
    await pacer.report(originOf(quota.url), { kind: 'response', status: 429, headers: tooMany }, 1e6);
    return pacer;
  }

  /** A queue that counts the leases of each request. */
  const countingQueue = () => h.countingQueue();

  function pacedRequests(run: string, count: number) {
    return Array.from({ length: count }, (_, i) => ({
      request: { uri: `${quota.url}/park?run=${run}&n=${i}` },
      meta: { requestId: `${run}-p-${i}` },
    }));
  }

  it('parks a paced backlog beyond the leases held per worker (a budget of its own), another origin still served', async () => {
    const pacer = await pausedPacer(4);
    const { queue, leased } = countingQueue();
    // One worker, 4 leases held at most (HELD_PER_WORKER): 12 parked tasks are beyond that bound.
    h.startExecutor({ queue, pacer, maxWorkers: 1 });
    const run = uniqueName('backlog');
    const paced = pacedRequests(run, 12);
    await h.submit(queue, paced);
    while ((await counter('requester_executor_parked_tasks')) < 12) await sleep(20);
    const other = {
      request: { uri: `${h.target.url}/echo?run=${run}` },
      meta: { requestId: `${run}-other` },
    };
    await h.submit(queue, [other]);

    await h.resultOf(other.meta.requestId);
    expect(paced.filter((e) => h.results.has(e.meta.requestId))).toEqual([]);
    const results = await Promise.all(paced.map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual(paced.map(() => [200, 1]));
    expect(paced.map((e) => leased.get(e.meta.requestId))).toEqual(paced.map(() => 1));
    expect(await counter('requester_executor_parked_tasks')).toBe(0);
  }, 60_000);

  it('a paced backlog beyond the booking horizon waits parked without a slot, and takes one at the pace of when it is back: one lease each', async () => {
    // Held 2 s, then 6.3/s growing back to 9/s: every slot beyond 250 ms (the local wait) is left free.
    const pacer = await pausedPacer(2);
    const origin = originOf(quota.url);
    const holdUntil = (await pacer.snapshot(origin)).holdUntilMs ?? 0;
    const asked: Array<{ reservedMs: number | undefined; admitted: boolean; slotMs: number }> = [];
    const gate = pacer.gate.bind(pacer);
    pacer.gate = async (o, reservedMs) => {
      const grant = await gate(o, reservedMs);
      asked.push({ reservedMs, admitted: grant.admitted, slotMs: grant.admitted ? 0 : grant.slotMs });
      return grant;
    };
    const { queue, leased } = countingQueue();
    const lateBefore = await lateWakeUps();
    h.startExecutor({ queue, pacer, maxWorkers: 2 });
    const run = uniqueName('horizon');
    const paced = pacedRequests(run, 16);
    await h.submit(queue, paced);

    const results = await Promise.all(paced.map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual(paced.map(() => [200, 1]));
    // Waited parked, not in the queue: one lease each.
    expect(paced.map((e) => leased.get(e.meta.requestId))).toEqual(paced.map(() => 1));
    // No slot was reserved (all were farther than the local wait): each came back unbooked and
    // asked again, a few gate calls each at most.
    expect(asked.filter((a) => a.slotMs > 0 || a.reservedMs !== undefined)).toEqual([]);
    // Admitted once each, and once more for a call woken well past its slot on a loaded box.
    const late = (await lateWakeUps()) - lateBefore;
    expect(asked.filter((a) => a.admitted).length - late).toBe(16);
    expect(asked.length - late).toBeLessThan(16 * 4);
    // None of them reached the target before the hold's end.
    const calls = (await quota.arrivals()).filter((a) => a.path.includes(`run=${run}&`));
    expect(calls).toHaveLength(16);
    expect(calls.every((a) => a.at >= holdUntil)).toBe(true);
  }, 60_000);

  it.each([
    ['tasks', { tasks: 2, bytes: 1 << 20 }, [1, 1, 2, 2, 2]],
    ['bytes', { tasks: 1_000, bytes: 100 }, [2, 2, 2, 2, 2]],
  ])(
    'parks no more than the parking budget of %s; the rest goes back to the queue',
    async (_, parking, leases) => {
      const pacer = await pausedPacer(2);
      const { queue, leased } = countingQueue();
      h.startExecutor({ queue, pacer, maxWorkers: 1, parking });
      const paced = pacedRequests(uniqueName('budget'), 5);
      await h.submit(queue, paced);
      const results = await Promise.all(paced.map((e) => h.resultOf(e.meta.requestId)));
      expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual(paced.map(() => [200, 1]));
      expect(paced.map((e) => leased.get(e.meta.requestId)).sort()).toEqual(leases);
    },
    60_000,
  );

  it('a retry due within the park horizon waits parked: one lease, still an attempt (tryCount 2)', async () => {
    const { queue, leased } = countingQueue();
    h.startExecutor({ queue, maxWorkers: 1 });
    const run = uniqueName('retry-park');
    const task = {
      request: { uri: `${h.target.url}/flaky/${run}/1?status=429&retry-after=1` },
      meta: { requestId: run, retry: { max: 3, delay: '10ms' } },
    };
    await h.submit(queue, [task]);
    const result = await h.resultOf(run);
    expect([result.response.status, result.meta.tryCount, result.meta.waitTime]).toEqual([200, 2, 0]);
    expect(h.callsWith(run)).toHaveLength(2);
    expect(leased.get(run)).toBe(1);
  }, 60_000);

  /** A breaker for which a new origin is unproven: one trial call at a time until one succeeds. */
  function oneTrialBreaker(busyRetryMs: number) {
    return new CircuitBreaker({
      redis: h.redis,
      prefix: h.prefix('breaker'),
      failureThreshold: 1,
      openMs: 30_000,
      stateCacheMs: 1_000,
      busyRetryMs,
    });
  }

  it('a busy breaker refusal (a new origin, its one trial call in flight) waits parked: one lease each, no attempt spent', async () => {
    const { queue, leased } = countingQueue();
    h.startExecutor({ queue, breaker: oneTrialBreaker(2_000), maxWorkers: 3 });
    const run = uniqueName('busy-park');
    const trial = { request: { uri: `${h.target.url}/hold/${run}` }, meta: { requestId: `${run}-trial` } };
    const refused = Array.from({ length: 2 }, (_, i) => ({
      request: { uri: `${h.target.url}/echo?run=${run}&n=${i}` },
      meta: { requestId: `${run}-${i}` },
    }));
    await h.submit(queue, [trial]);
    await h.until(() => (h.target.holding(run) === 1 ? true : undefined));
    await h.submit(queue, refused);
    while ((await counter('requester_executor_parked_tasks')) < 2) await sleep(20);
    h.target.release(run);

    const results = await Promise.all([trial, ...refused].map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual(results.map(() => [200, 1]));
    expect(results.slice(1).every((r) => r.meta.waitTime > 0)).toBe(true);
    expect([trial, ...refused].map((e) => leased.get(e.meta.requestId))).toEqual([1, 1, 1]);
  }, 60_000);

  it('a breaker that stays busy is re-checked a few times parked, then the task goes back to the queue', async () => {
    const { queue, leased } = countingQueue();
    h.startExecutor({ queue, breaker: oneTrialBreaker(100), maxWorkers: 2 });
    const run = uniqueName('busy-bound');
    const held = { request: { uri: `${h.target.url}/hold/${run}` }, meta: { requestId: `${run}-held` } };
    const waiting = {
      request: { uri: `${h.target.url}/echo?run=${run}` },
      meta: { requestId: `${run}-waiting` },
    };
    await h.submit(queue, [held]);
    await h.until(() => (h.target.holding(run) === 1 ? true : undefined));
    await h.submit(queue, [waiting]);
    // Its trial slot held by a call that hangs: parked BUSY_PARKS_MAX times, then leased again.
    await h.until(() => ((leased.get(waiting.meta.requestId) ?? 0) >= 2 ? true : undefined));
    h.target.release(run);
    const results = await Promise.all([held, waiting].map((e) => h.resultOf(e.meta.requestId)));
    expect(results.map((r) => [r.response.status, r.meta.tryCount])).toEqual([
      [200, 1],
      [200, 1],
    ]);
  }, 60_000);

  it('a parked task whose lease may have lapsed (the heartbeat failing) is not called: the executor that leased it again calls it once', async () => {
    const pacer = await pausedPacer(4);
    const queue = h.newQueue();
    // Redis unreachable once it leased the task: its heartbeat fails, and the lease lapses at
    // 1.5 s, its task parked until its slot at 4 s. Cut off from the lease that brought the task,
    // not the first lease: the executor leases as it starts, often before the task is published.
    let cut = false;
    let emptyLeases = 0;
    const cutOff = Object.assign(Object.create(queue) as typeof queue, {
      lease: async (...args: Parameters<typeof queue.lease>) => {
        if (!cut) {
          const leased = await queue.lease(...args);
          cut = leased.tasks.length > 0;
          if (!cut) emptyLeases++;
          return leased;
        }
        await sleep(100);
        throw new Error('Redis unreachable');
      },
      extendMany: async () => {
        throw new Error('Redis unreachable');
      },
    });
    const first = h.startExecutor({ queue: cutOff, pacer, maxWorkers: 1, leaseTtlMs: 1_500 });
    const run = uniqueName('lapse');
    const [task] = pacedRequests(run, 1);
    if (!task) throw new Error('no task');
    // Published once a lease came back empty, always: the order that cut the executor off before
    // it held the task when only its first lease reached Redis.
    await h.until(() => (emptyLeases > 0 ? true : undefined));
    await h.submit(queue, [task]);
    await h.until(() => (first.executor.inFlight === 1 ? true : undefined));
    // Its first lease lapsed and taken back: another executor leases it, parks it for a slot of its
    // own (after the first one's), and calls it.
    while ((await queue.reclaim()).reclaimed === 0) await sleep(50);
    h.startExecutor({ queue, pacer, maxWorkers: 1 });

    const result = await h.resultOf(task.meta.requestId);
    expect([result.response.status, result.meta.tryCount]).toEqual([200, 1]);
    await h.until(() => (first.executor.inFlight === 0 ? true : undefined));
    const calls = (await quota.arrivals()).filter((a) => a.path.includes(`run=${run}&`));
    expect(calls).toHaveLength(1);
  }, 60_000);

  it('a parked task goes back to the queue when its executor drains, and another executor calls it at its slot', async () => {
    const paceKeys = h.prefix('pace');
    const pacer = () =>
      new OriginPacer({
        redis: h.redis,
        prefix: paceKeys,
        maxLimit: 16,
        retryAfterMaxMs: 60_000,
        maxLocalWaitMs: 0,
      });
    const origin = originOf(quota.url);
    const tooMany = { 'retry-after': '3', 'ratelimit-policy': '10;w=1' };
    await pacer().report(origin, { kind: 'response', status: 429, headers: tooMany }, 1e6);
    const first = h.startExecutor({ pacer: pacer(), maxWorkers: 1 });
    const run = uniqueName('drain');
    const task = { request: { uri: `${quota.url}/drain?run=${run}` }, meta: { requestId: `${run}-p` } };
    await h.submit(first.queue, [task]);
    await h.until(() => (first.executor.inFlight === 1 ? true : undefined));
    await first.stop();
    expect(h.results.has(task.meta.requestId)).toBe(false);
    h.startExecutor({ queue: first.queue, pacer: pacer(), maxWorkers: 1 });
    const result = await h.resultOf(task.meta.requestId);
    expect([result.response.status, result.meta.tryCount]).toEqual([200, 1]);
  }, 60_000);

  it('a call woken well past its slot (its process stalled) asks the gate again instead of leaving late', async () => {
    const pacer = new OriginPacer({
      redis: h.redis,
      prefix: h.prefix('pace'),
      maxLimit: 16,
      retryAfterMaxMs: 60_000,
      maxLocalWaitMs: 5_000,
    });
    // Paced at 90 % of an advertised 1 per 2 s: a call after the first sleeps ~2.2 s for its slot.
    const origin = originOf(h.target.url);
    await pacer.report(
      origin,
      { kind: 'response', status: 200, headers: { 'ratelimit-policy': '1;w=2' } },
      1e6,
    );
    const gates: number[] = [];
    let stall = false;
    // The real pacer, whose gate this process answers late once: its event loop blocked for 3 s
    // right after the gate admits the second call, as a stalled process would be.
    const stalling = Object.assign(Object.create(pacer) as OriginPacer, {
      gate: async (...args: Parameters<OriginPacer['gate']>) => {
        const grant = await pacer.gate(...args);
        gates.push(grant.admitted ? grant.waitMs : -1);
        if (stall && grant.admitted && grant.waitMs > 0) {
          stall = false;
          const until = Date.now() + grant.waitMs + 3_000;
          while (Date.now() < until) {
            // Busy: no timer of this process fires meanwhile.
          }
        }
        return grant;
      },
    });
    const lateBefore = await lateWakeUps();
    const { queue } = h.startExecutor({ pacer: stalling, maxWorkers: 4 });
    const run = uniqueName('woken');
    const first = {
      request: { uri: `${h.target.url}/echo?run=${run}&n=1` },
      meta: { requestId: `${run}-1` },
    };
    await h.submit(queue, [first]);
    await h.resultOf(first.meta.requestId);
    stall = true;
    const second = {
      request: { uri: `${h.target.url}/echo?run=${run}&n=2` },
      meta: { requestId: `${run}-2` },
    };
    await h.submit(queue, [second]);
    expect((await h.resultOf(second.meta.requestId)).response.status).toBe(200);
    // Its first gate gave a slot ~2.2 s ahead; woken 3 s past it, it asked again (a slot of now,
    // or one ahead: the pace's, not the stall's), and the late wake-up was counted.
    expect(gates.filter((waitMs) => waitMs > 0).length).toBeGreaterThanOrEqual(1);
    expect(gates.length).toBeGreaterThanOrEqual(3);
    expect((await lateWakeUps()) - lateBefore).toBe(1);
  }, 60_000);

  it('a call asleep until its slot does not go inside a hold a 429 answered meanwhile sets', async () => {
    const pacer = new OriginPacer({
      redis: h.redis,
      prefix: h.prefix('pace'),
      maxLimit: 16,
      retryAfterMaxMs: 60_000,
      maxLocalWaitMs: 5_000,
    });
    // Paced at 90 % of an advertised 1 per 2 s: the next slot is ~2.2 s after the last.
    const origin = originOf(h.target.url);
    await pacer.report(
      origin,
      { kind: 'response', status: 200, headers: { 'ratelimit-policy': '1;w=2' } },
      1e6,
    );
    const { queue, executor } = h.startExecutor({ pacer, maxWorkers: 4 });
    const run = uniqueName('asleep');
    const refused = {
      request: { uri: `${h.target.url}/hold/${run}/429?retry-after=3` },
      meta: { requestId: `${run}-a` },
    };
    const asleep = { request: { uri: `${h.target.url}/echo?run=${run}` }, meta: { requestId: `${run}-b` } };
    await h.submit(queue, [refused]);
    await h.until(() => (h.target.holding(run) === 1 ? true : undefined));
    // The second call takes the next slot, ~2 s away, and sleeps for it in its worker.
    await h.submit(queue, [asleep]);
    await h.until(() => (executor.inFlight === 2 ? true : undefined));
    await h.until(
      async () => ((await pacer.snapshot(origin)).nextSlotMs ?? 0) > Date.now() + 1_000 || undefined,
    );
    // The first is answered 429 + Retry-After: 3 while the second sleeps (1 s or more to go): the
    // origin is held 3 s.
    const answeredAt = Date.now();
    h.target.release(run);
    const result = await h.resultOf(asleep.meta.requestId);
    expect(result.response.status).toBe(200);
    const arrived = h.target.calls.find((c) => c.path === `/echo?run=${run}`)?.at ?? 0;
    // Not at its slot (1–2 s after the 429), inside the hold: after the hold's end.
    expect(arrived - answeredAt).toBeGreaterThanOrEqual(3_000);
  }, 60_000);
});
