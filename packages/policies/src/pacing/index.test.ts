import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { startPacedTargetProcess } from '@requester/shared/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { originOf } from '../breaker/index.ts';
import { OriginPacer, type OriginPacerOptions, type PacedOutcome, type PaceSlot } from './index.ts';
import { eventLoopLagMs } from './loop-lag.ts';

const redis: RedisClient = createRedis({ url: 'redis://127.0.0.1:6379', commandTimeoutMs: 2_000 });
const prefixes: string[] = [];
const ORIGIN = 'http://127.0.0.1:9';
const ok: PacedOutcome = { kind: 'response', status: 200, headers: {} };
const tooMany = (headers: Record<string, string> = {}): PacedOutcome => ({
  kind: 'response',
  status: 429,
  headers,
});
const MS = 1_000_000; // ns

/**
 * A pacer reporting each turn of the event loop: these tests await one answer after another, and
 * a wait of `reportEveryMs` each would stretch them past the floor's 10 s probe (the wait itself is
 * tested with `executors`).
 */
function pacer(options: Partial<OriginPacerOptions> = {}): OriginPacer {
  const prefix = `t:${randomBytes(6).toString('hex')}:pace:`;
  prefixes.push(prefix);
  return new OriginPacer({
    redis,
    prefix,
    maxLimit: 8,
    retryAfterMaxMs: 3_600_000,
    reportEveryMs: 0,
    ...options,
  });
}

afterAll(async () => {
  for (const prefix of prefixes) {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
});

describe('OriginPacer', () => {
  it('lets an origin nobody asked to slow down go at once', async () => {
    const p = pacer();
    for (let i = 0; i < 20; i++) expect(await p.gate(ORIGIN)).toEqual({ admitted: true, waitMs: 0 });
    await p.report(ORIGIN, ok, 5 * MS);
    expect(await p.gate(ORIGIN)).toEqual({ admitted: true, waitMs: 0 });
  });

  it('holds the whole origin for the Retry-After of a 429, and books its waiters slots spaced at the pace (every slot booked)', async () => {
    const p = pacer({ maxLocalWaitMs: 0, bookAheadMs: Number.POSITIVE_INFINITY });
    const report = await p.report(ORIGIN, tooMany({ 'retry-after': '30', 'ratelimit-policy': '10;w=1' }), MS);
    // Paced at 90 % of the advertised 10/s, then at 70 % of that.
    expect(report).toMatchObject({ kind: 'slow', throttled: true });
    expect(report?.rate).toBeCloseTo(6.3);
    const slots: number[] = [];
    for (let i = 0; i < 5; i++) {
      const grant = await p.gate(ORIGIN);
      expect(grant.admitted).toBe(false);
      if (!grant.admitted) {
        expect(grant.retryInMs).toBeGreaterThan(29_000);
        slots.push(grant.slotMs);
      }
    }
    // No start before the hold's end; then one per 1000/6.3 ms (Redis time), not all at once.
    expect(slots[0]).toBe((await p.snapshot(ORIGIN)).holdUntilMs);
    for (let i = 1; i < slots.length; i++)
      expect(Math.abs((slots[i] ?? 0) - (slots[i - 1] ?? 0) - 1000 / 6.3)).toBeLessThanOrEqual(1);
  });

  it('books no slot beyond the horizon: the waiters of a hold take none, and come back spaced before its end', async () => {
    const p = pacer({ maxLocalWaitMs: 0, bookAheadMs: 500 });
    await p.report(ORIGIN, tooMany({ 'retry-after': '30', 'ratelimit-policy': '10;w=1' }), MS);
    const grants = [];
    for (let i = 0; i < 5; i++) grants.push(await p.gate(ORIGIN));
    for (const grant of grants) {
      expect(grant.admitted).toBe(false);
      // Unbooked: it asks again when the horizon reaches it, half a second before the hold's end.
      if (!grant.admitted) expect([grant.slotMs, grant.retryInMs > 29_000]).toEqual([0, true]);
    }
    const snap = await p.snapshot(ORIGIN);
    expect(snap.nextSlotMs).toBeUndefined(); // every slot still free
    // The lane spaces their returns at 110 % of the pace expected then (6.3/s until the hold's end,
    // growing after it): neither all at once nor slower than the pace.
    const lane = (snap.laneMs ?? 0) - ((snap.holdUntilMs ?? 0) - 500);
    expect(lane).toBeGreaterThan(4 * (1000 / (6.3 * 1.1)));
    expect(lane).toBeLessThanOrEqual(5 * (1000 / (6.3 * 1.1)) + 1);
  });

  it("gives each client a return lane of its own: a backlog down one, across executors, is no newcomer's wait", async () => {
    const a = pacer({ maxLocalWaitMs: 0, bookAheadMs: 500 });
    const b = new OriginPacer({
      redis,
      prefix: prefixes.at(-1) ?? '',
      maxLimit: 8,
      retryAfterMaxMs: 3_600_000,
      reportEveryMs: 0,
      maxLocalWaitMs: 0,
      bookAheadMs: 500,
    });
    await a.report(ORIGIN, tooMany({ 'retry-after': '30', 'ratelimit-policy': '10;w=1' }), MS);
    const backlog: number[] = [];
    for (let i = 0; i < 30; i++) {
      const grant = await a.gate(ORIGIN, undefined, undefined, 'A');
      if (!grant.admitted) backlog.push(Date.now() + grant.retryInMs);
    }
    // Client B, on the other executor, asks after A's 30 went down A's lane: its first return is
    // due when the horizon reaches the hold's end, as A's first was, not after A's 30.
    const newcomer = await b.gate(ORIGIN, undefined, undefined, 'B');
    if (newcomer.admitted) throw new Error('expected a refusal');
    expect(newcomer.slotMs).toBe(0);
    expect(Date.now() + newcomer.retryInMs).toBeLessThan(backlog[2] ?? 0);
    // Without a client, the calls share the lane of their own, as before.
    const unnamed = await b.gate(ORIGIN);
    if (unnamed.admitted) throw new Error('expected a refusal');
    expect(Date.now() + unnamed.retryInMs).toBeLessThan(backlog[2] ?? 0);
    await b.close();
  });

  it("spaces two backlogged clients' returns by their weights (3 : 1), across executors", async () => {
    const weightOf = (client: string) => (client === 'A' ? 3 : 1);
    const a = pacer({ maxLocalWaitMs: 0, bookAheadMs: 500, weightOf });
    const b = new OriginPacer({
      redis,
      prefix: prefixes.at(-1) ?? '',
      maxLimit: 8,
      retryAfterMaxMs: 3_600_000,
      reportEveryMs: 0,
      maxLocalWaitMs: 0,
      bookAheadMs: 500,
      weightOf,
    });
    await a.report(ORIGIN, tooMany({ 'retry-after': '30', 'ratelimit-policy': '10;w=1' }), MS);
    const backs: Array<{ client: string; atMs: number }> = [];
    for (let i = 0; i < 60; i++) {
      for (const [p, client] of [
        [a, 'A'],
        [b, 'B'],
      ] as const) {
        const grant = await p.gate(ORIGIN, undefined, undefined, client);
        if (!grant.admitted) backs.push({ client, atMs: Date.now() + grant.retryInMs });
      }
    }
    // While both have waiters down their lanes, they come back (and so take the slots) 3 : 1.
    const last = (client: string) => Math.max(...backs.filter((x) => x.client === client).map((x) => x.atMs));
    const both = backs.filter((x) => x.atMs <= Math.min(last('A'), last('B')));
    const ofA = both.filter((x) => x.client === 'A').length;
    const ofB = both.length - ofA;
    expect(ofB).toBeGreaterThan(10);
    expect(ofA / ofB).toBeGreaterThanOrEqual(3 * 0.85);
    expect(ofA / ofB).toBeLessThanOrEqual(3 * 1.15);
    await b.close();
  });

  it('a backlog beyond the horizon goes at the pace of when it comes back, not at the one it first asked at', async () => {
    const p = pacer({ maxLocalWaitMs: 0, bookAheadMs: 1_000 });
    await p.report(ORIGIN, { kind: 'response', status: 200, headers: { 'ratelimit-policy': '10;w=1' } }, MS);
    await p.report(ORIGIN, tooMany(), MS); // a 429 without Retry-After: the pace cut to 6.3/s, no hold
    const first: Array<{ slotMs: number; retryInMs: number }> = [];
    for (let i = 0; i < 12; i++) {
      const grant = await p.gate(ORIGIN);
      if (!grant.admitted) first.push(grant);
    }
    // Slots within the second ahead are booked 1000/6.3 ms apart; the tasks beyond it take none.
    const booked = first.filter((g) => g.slotMs > 0).map((g) => g.slotMs);
    const laned = first.filter((g) => g.slotMs === 0);
    expect(booked.length).toBeGreaterThanOrEqual(3);
    expect(booked.length).toBeLessThanOrEqual(7);
    expect(laned.length).toBe(11 - booked.length);
    for (let i = 1; i < booked.length; i++)
      expect((booked[i] ?? 0) - (booked[i - 1] ?? 0)).toBeGreaterThanOrEqual(Math.floor(1000 / 6.3));
    // The pace grows back (to 9/s, 90 % of the advertised 10) before they return.
    for (let i = 0; i < 8; i++) await p.report(ORIGIN, ok, MS);
    expect((await p.snapshot(ORIGIN)).rate).toBe(9);
    await sleep(Math.max(...laned.map((g) => g.retryInMs)));
    // Back, they take slots at the pace of now: 1000/9 ms apart (those booked in one go are
    // consecutive whatever the time the test took to get here).
    const again = await Promise.all(laned.map(() => p.gate(ORIGIN)));
    const slots = again.flatMap((g) => (!g.admitted && g.slotMs > 0 ? [g.slotMs] : [])).sort((a, b) => a - b);
    expect(slots.length).toBeGreaterThanOrEqual(laned.length - 1);
    for (let i = 1; i < slots.length; i++) {
      expect((slots[i] ?? 0) - (slots[i - 1] ?? 0)).toBeGreaterThanOrEqual(Math.floor(1000 / 9));
      expect((slots[i] ?? 0) - (slots[i - 1] ?? 0)).toBeLessThanOrEqual(Math.ceil(1000 / 9));
    }
  });

  it('lets a task back at its reserved slot go without taking another; a late one goes in the late lane', async () => {
    // Every slot booked: a slot farther than the horizon would not be reserved at all.
    const p = pacer({ maxLocalWaitMs: 0, bookAheadMs: Number.POSITIVE_INFINITY });
    await p.report(ORIGIN, { kind: 'response', status: 200, headers: { 'ratelimit-policy': '1;w=1' } }, MS);
    expect((await p.gate(ORIGIN)).admitted).toBe(true); // the first slot: now
    const refused = await p.gate(ORIGIN);
    if (refused.admitted) throw new Error('expected a refusal');
    const next = (await p.snapshot(ORIGIN)).nextSlotMs;
    // maxLocalWaitMs 0: only a task back exactly at its slot is let through: ask with a wider one.
    const onTime = new OriginPacer({
      redis,
      prefix: prefixes.at(-1) ?? '',
      maxLimit: 8,
      retryAfterMaxMs: 3_600_000,
      maxLocalWaitMs: 60_000,
      bookAheadMs: Number.POSITIVE_INFINITY,
    });
    expect(await onTime.gate(ORIGIN, refused.slotMs)).toMatchObject({ admitted: true });
    expect((await p.snapshot(ORIGIN)).nextSlotMs).toBe(next); // no slot taken
    expect((await p.gate(ORIGIN, refused.slotMs + 3_600_000)).admitted).toBe(false); // early: a new slot
    const after = (await p.snapshot(ORIGIN)).nextSlotMs ?? 0;
    expect(after - (next ?? 0)).toBeCloseTo(1000 / 0.9); // paced at 90 % of 1/s
    // Late: the first goes now, the next one a slot later (1/s), neither taking a regular slot.
    expect(await p.gate(ORIGIN, refused.slotMs - 3_600_000)).toEqual({ admitted: true, waitMs: 0 });
    expect((await p.gate(ORIGIN, refused.slotMs - 3_600_000)).admitted).toBe(false);
    expect((await p.snapshot(ORIGIN)).nextSlotMs).toBe(after);
  });

  it("keeps a credential identity's hold and limit to its own calls: another identity's, and the origin's, go at once", async () => {
    const p = pacer();
    const held = await p.report(ORIGIN, tooMany({ 'retry-after': '600' }), MS, undefined, 'c:partner-pay');
    expect(held?.holdMs).toBeGreaterThan(0);
    expect(await p.gate(ORIGIN, undefined, 'c:partner-pay')).toMatchObject({ admitted: false });
    expect(p.heldForMs(ORIGIN, 0, Date.now(), 'c:partner-pay')).toBeGreaterThan(0);
    expect(await p.gate(ORIGIN, undefined, 'c:other')).toEqual({ admitted: true, waitMs: 0 });
    expect(await p.gate(ORIGIN)).toEqual({ admitted: true, waitMs: 0 });
    expect(p.heldForMs(ORIGIN, 0)).toBe(0);
    expect((await p.snapshot(ORIGIN)).holdUntilMs).toBeUndefined();
    // An identity not heard of yet has the origin's learnt limit.
    await p.report(ORIGIN, ok, MS);
    expect(p.limitOf(ORIGIN)).toBeDefined();
    expect(p.limitOf(ORIGIN, 'c:never-seen')).toBe(p.limitOf(ORIGIN));
  });

  it('bounds a hold by RETRY_AFTER_MAX', async () => {
    const p = pacer({ maxLocalWaitMs: 0, retryAfterMaxMs: 2_000 });
    await p.report(ORIGIN, tooMany({ 'retry-after': '86400' }), MS);
    const grant = await p.gate(ORIGIN);
    expect(grant.admitted).toBe(false);
    if (!grant.admitted) expect(grant.retryInMs).toBeLessThanOrEqual(2_000);
  });

  it('paces at the advertised RateLimit-Policy from the first answer: dispatch slots 1000/rate ms apart', async () => {
    const p = pacer({ maxLocalWaitMs: 10_000 });
    await p.report(ORIGIN, { kind: 'response', status: 200, headers: { 'ratelimit-policy': '20;w=1' } }, MS);
    expect((await p.snapshot(ORIGIN)).rate).toBe(18); // 90 % of it: a margin for the dispatch jitter
    const slots: number[] = [];
    for (let i = 0; i < 6; i++) {
      expect((await p.gate(ORIGIN)).admitted).toBe(true);
      slots.push((await p.snapshot(ORIGIN)).nextSlotMs ?? 0);
    }
    // Each dispatch takes the next slot: 1000/18 ms after the previous one (Redis time), whenever the gates ran.
    for (let i = 1; i < slots.length; i++)
      expect((slots[i] ?? 0) - (slots[i - 1] ?? 0)).toBeGreaterThanOrEqual(55);
  });

  it('lowers the pace once for a burst of 429s, then brings it back gradually up to the ceiling', async () => {
    const p = pacer();
    await p.report(ORIGIN, { kind: 'response', status: 200, headers: { 'ratelimit-policy': '40;w=1' } }, MS);
    const burst = await Promise.all(Array.from({ length: 10 }, () => p.report(ORIGIN, tooMany(), MS)));
    expect(burst.filter((r) => r?.throttled)).toHaveLength(1);
    expect((await p.snapshot(ORIGIN)).rate).toBeCloseTo(36 * 0.7);
    let rate = 36 * 0.7;
    for (let i = 0; i < 30; i++) {
      const r = await p.report(ORIGIN, ok, MS);
      expect(r?.rate).toBeGreaterThan(rate); // +0.35 per success: gradual
      expect(r?.rate).toBeLessThan(rate + 0.36);
      rate = r?.rate ?? 0;
    }
    for (let i = 0; i < 300; i++) await p.report(ORIGIN, ok, MS);
    expect((await p.snapshot(ORIGIN)).rate).toBe(36); // never above 90 % of what the target advertised
  });

  it('cuts the pace of a target that advertises nothing to the rate it served, not to 70 % of the rate sent', async () => {
    const p = pacer();
    // A burst of 75 dispatches (300/s over the 250 ms a first burst is read over), of which the
    // target served 8 before answering 429 + Retry-After.
    for (let i = 0; i < 75; i++) expect((await p.gate(ORIGIN)).admitted).toBe(true);
    for (let i = 0; i < 8; i++) await p.report(ORIGIN, ok, MS);
    const cut = await p.report(ORIGIN, tooMany({ 'retry-after': '1' }), MS);
    expect(cut).toMatchObject({ kind: 'slow', throttled: true });
    // 90 % of 8 served over at least a second (≤ 7.2/s), not 70 % of the 300/s sent (210/s).
    const first = cut?.rate ?? 0;
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(0.9 * 8 + 1e-6);
    // The burst's answers still coming in: 200s reported after the 429 may raise the pace to what
    // was served (12 over at least a second), 429s lower nothing more.
    for (let i = 0; i < 4; i++) await p.report(ORIGIN, ok, MS);
    const later = await Promise.all(
      Array.from({ length: 5 }, () => p.report(ORIGIN, tooMany({ 'retry-after': '1' }), MS)),
    );
    expect(later.filter((r) => r?.throttled)).toHaveLength(0);
    const rate = (await p.snapshot(ORIGIN)).rate ?? 0;
    expect(rate).toBeGreaterThanOrEqual(first);
    expect(rate).toBeLessThanOrEqual(0.9 * 12 + 1e-6);
    // No start before the hold's end.
    expect((await p.gate(ORIGIN)).admitted).toBe(false);
  });

  it("grows a silent target's pace back fast up to what it served when refused, then probes past it slowly", async () => {
    const p = pacer();
    // A little over a second of calls, each served: the rate served is read over a whole second.
    const until = Date.now() + 1_100;
    while (Date.now() < until) {
      await p.gate(ORIGIN);
      await p.report(ORIGIN, ok, MS);
      await sleep(10);
    }
    // A 429 without Retry-After: paced at once, at 70 % of the rate sent (the served one is as
    // high: every call was served); the probe line at 90 % of the rate served.
    const cut = await p.report(ORIGIN, tooMany(), MS);
    expect(cut?.throttled).toBe(true);
    let rate = cut?.rate ?? 0;
    const steps: number[] = [];
    for (let i = 0; i < 200; i++) {
      const next = (await p.report(ORIGIN, ok, MS))?.rate ?? 0;
      steps.push(Math.round((next - rate) * 100) / 100);
      rate = next;
    }
    // +0.35 per success below the line (0.9/0.7 × the first pace), then +0.05 past it.
    expect(steps[0]).toBe(0.35);
    expect(steps.at(-1)).toBe(0.05);
    const fast = steps.filter((step) => step === 0.35).length;
    expect(steps.slice(0, fast).every((step) => step === 0.35)).toBe(true);
    expect(((cut?.rate ?? 0) + 0.35 * fast) / (cut?.rate ?? 1)).toBeCloseTo(0.9 / 0.7, 1);
  });

  it('adapts the concurrency limit to the latency floor: up near it, down on queueing and timeouts', async () => {
    const p = pacer({ maxLimit: 16 });
    await p.report(ORIGIN, { kind: 'failure', error: { code: 'timeout' } }, 10_000 * MS);
    expect(p.limitOf(ORIGIN)).toBe(11); // 16 × 0.7
    // The first success is the floor (the first calls of a burst find the target's queue empty).
    await p.report(ORIGIN, ok, 5 * MS);
    expect(await p.snapshot(ORIGIN)).toMatchObject({ floorMs: 5, probing: false });
    for (let i = 0; i < 200; i++) await call(p, 5);
    expect(p.limitOf(ORIGIN)).toBe(16);
    // A queue forming at the target: 16 calls at once, the latency grows (100 × the floor: well past
    // the lag of this process on a loaded machine, which is allowed for), the limit comes down.
    for (let i = 0; i < 8; i++) await Promise.all(Array.from({ length: 16 }, () => call(p, 500)));
    expect(p.limitOf(ORIGIN)).toBeLessThan(12);
    // A 429 is answered by the pace, not by the limit.
    const q = pacer({ maxLimit: 16 });
    await q.report(ORIGIN, tooMany(), MS);
    expect(q.limitOf(ORIGIN)).toBe(16);
  });

  it('tolerates a little queue (1.25 × the floor), and past it shrinks by how far past the latency is', async () => {
    const still = () => 0; // no event-loop lag allowed for: the bound is 1.25 × 10 + 0.5 = 13 ms
    const atLimit = { inFlight: 16, full: true };
    const p = pacer({ maxLimit: 16, loopLagMs: still });
    await firstAnswer(p, 10); // the floor
    // 1.2 × the floor where the limit binds: the target is busy, not queueing much: it stays.
    for (let i = 0; i < 100; i++) await gateAndReport(p, 12, atLimit);
    expect(await p.snapshot(ORIGIN)).toMatchObject({ floorMs: 10, limit: 16 });
    // Just past the bound (14.6 ms: a gradient of 13/14.6) and far past it (40 ms): the recent average
    // is brought there first by calls that found room (they lower nothing), then 16 calls that
    // took the last slot, a round: the far one loses a whole step (half a call), the near one a fifth of that.
    const past = async (latencyMs: number) => {
      const q = pacer({ maxLimit: 16, loopLagMs: still });
      await firstAnswer(q, 10);
      for (let i = 0; i < 100; i++) await gateAndReport(q, latencyMs, { inFlight: 1, full: false });
      expect((await q.snapshot(ORIGIN)).limit).toBe(16);
      for (let i = 0; i < 16; i++) await gateAndReport(q, latencyMs, atLimit);
      return (await q.snapshot(ORIGIN)).limit ?? Number.NaN;
    };
    const near = await past(14.6);
    const far = await past(40);
    expect(near).toBeGreaterThan(15.85);
    expect(near).toBeLessThan(15.93);
    expect(far).toBeGreaterThan(15.45);
    expect(far).toBeLessThan(15.55);
  });

  it('measures the floor again with a probe at one call, and then sees a slower target as such', async () => {
    const p = pacer({ maxLimit: 16 });
    await p.report(ORIGIN, ok, 5 * MS);
    expect(p.limitOf(ORIGIN)).toBe(16);
    await p.probe(ORIGIN); // due now rather than in 10 s
    await p.report(ORIGIN, ok, 20 * MS);
    expect(await p.snapshot(ORIGIN)).toMatchObject({ probing: true, limit: 1 });
    // Its samples are the calls that started once those already out were answered (Redis time):
    // report until it has them, then the limit goes back to where it was, with the new floor.
    await reportUntil(p, 20, async () => !(await p.snapshot(ORIGIN)).probing);
    expect(await p.snapshot(ORIGIN)).toMatchObject({ floorMs: 20, limit: 16 });
    for (let i = 0; i < 100; i++) await p.report(ORIGIN, ok, 20 * MS);
    expect(p.limitOf(ORIGIN)).toBe(16);
  });

  it('gives a probe up when no call succeeds: the limit goes back, the floor stays', async () => {
    const p = pacer({ maxLimit: 16 });
    await p.report(ORIGIN, ok, 5 * MS);
    await p.probe(ORIGIN);
    await p.report(ORIGIN, ok, 5 * MS);
    expect(p.limitOf(ORIGIN)).toBe(1);
    const notFound: PacedOutcome = { kind: 'response', status: 404, headers: {} };
    for (let i = 0; (await p.snapshot(ORIGIN)).probing; i++) {
      if (i > 10_000) throw new Error('the probe never gave up');
      await p.report(ORIGIN, notFound, 5 * MS);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await p.snapshot(ORIGIN)).toMatchObject({ limit: 16, floorMs: 5 });
  });

  it('keeps the concurrency of a slow target that is not overloaded: held long, then answering at a steady latency', async () => {
    // The calls of a webhook receiver, or of a client capped at 2 in flight (fair-share.test.ts):
    // the first two held 1.5 s, the next ones answered in 100 to 250 ms as they come, never more
    // than 2 at once under a limit of 4. Those 2 queue nothing the limit could spare: it keeps
    // room for them (it may come down to 3, where it would bind, never under).
    const two = { inFlight: 2, full: false };
    const p = pacer({ maxLimit: 4 });
    await gateAndReport(p, 1_500, two);
    await gateAndReport(p, 1_500, two);
    for (let i = 0; i < 60; i++) await gateAndReport(p, [100, 250, 180][i % 3] as number, two);
    expect(p.limitOf(ORIGIN)).toBeGreaterThanOrEqual(3);
    // Even where the limit binds: a latency that falls (held 1.5 s, then a steady 200 ms) is no
    // queue; the floor falls with it.
    const atLimit = { inFlight: 4, full: true };
    const q = pacer({ maxLimit: 4 });
    for (let i = 0; i < 4; i++) await gateAndReport(q, 1_500, atLimit);
    for (let i = 0; i < 60; i++) await gateAndReport(q, 200, atLimit);
    expect(q.limitOf(ORIGIN)).toBe(4);
    expect(await q.snapshot(ORIGIN)).toMatchObject({ floorMs: 200 });
    // Latencies rising while the limit binds: a queue of ours, it shrinks.
    const r = pacer({ maxLimit: 4 });
    await gateAndReport(r, 200, atLimit);
    for (let i = 0; i < 60; i++) await gateAndReport(r, 1_500, atLimit);
    expect(r.limitOf(ORIGIN)).toBe(1);
    // Rising below it, with half of it in flight: down to one above them, where it binds, no further.
    const s = pacer({ maxLimit: 4 });
    await gateAndReport(s, 200, two);
    for (let i = 0; i < 60; i++) await gateAndReport(s, 1_500, two);
    expect(s.limitOf(ORIGIN)).toBe(3);
  });

  it('settles near the capacity of a real target 16 callers queue from the start, and follows it down when it halves', async () => {
    // 4 calls at once, 100 ms each, the rest queued; 16 callers admitted at the ceiling of 16.
    const target = await startPacedTargetProcess({ kind: 'capacity', concurrent: 4, serviceMs: 100 });
    try {
      // The lag the pacer allows for, as it read it: the band below is what the rule allows at it.
      const lags: number[] = [];
      const lag = () => {
        const ms = eventLoopLagMs();
        lags.push(ms);
        return ms;
      };
      const p = pacer({ maxLimit: 16, loopLagMs: lag });
      const loop = closedLoop(p, target.url, 16);
      await loop.until((limits) => limits.length >= 400);
      // Over the last 150 answers after 400: around the capacity, far from the ceiling.
      const settled = mean(loop.limits.slice(-150));
      expect(settled).toBeGreaterThanOrEqual(2);
      expect(settled).toBeLessThanOrEqual(
        Math.min(13, await allowedLimit(p, originOf(target.url), 4, 100, mean(lags.slice(-150)))),
      );
      target.setConcurrent(2);
      const halvedAt = loop.limits.length;
      const followed = async () =>
        loop.limits.length - halvedAt >= 60 &&
        mean(loop.limits.slice(-60)) <=
          (await allowedLimit(p, originOf(target.url), 2, 100, mean(lags.slice(-60))));
      await loop.until(followed);
      await loop.stop();
    } finally {
      await target.close();
    }
  });

  it("does not throttle a target answering in 1 ms when the caller's own event loop lags", async () => {
    const target = await startPacedTargetProcess({ kind: 'capacity', concurrent: 64, serviceMs: 1 });
    // A caller busy 4 ms of every 6: its answers are read up to a few ms late, whatever the target.
    const hog = setInterval(() => {
      const until = performance.now() + 4;
      while (performance.now() < until);
    }, 6);
    try {
      const p = pacer({ maxLimit: 16 });
      const loop = closedLoop(p, target.url, 8);
      await loop.until((limits) => limits.length >= 1_500);
      await loop.stop();
      // Most of the time above what the 8 callers need (the first answers are the probe's, at 1).
      const sorted = loop.limits.slice(100).sort((a, b) => a - b);
      expect(sorted[Math.floor(sorted.length / 2)]).toBeGreaterThanOrEqual(8);
    } finally {
      clearInterval(hog);
      await target.close();
    }
  });

  it('shares the pace between executors: a 429 seen by one holds the origin for the other', async () => {
    const a = pacer({ maxLocalWaitMs: 0 });
    const b = new OriginPacer({
      redis: createRedis({ url: 'redis://127.0.0.1:6379' }),
      prefix: prefixes.at(-1) ?? '',
      maxLimit: 8,
      retryAfterMaxMs: 3_600_000,
    });
    await a.report(ORIGIN, tooMany({ 'retry-after': '10' }), MS);
    expect((await b.gate(ORIGIN)).admitted).toBe(false);
  });

  it('fails open when Redis is unreachable', async () => {
    const down = createRedis({ url: 'redis://127.0.0.1:1', commandTimeoutMs: 200 });
    const p = new OriginPacer({ redis: down, prefix: 't:', maxLimit: 8, retryAfterMaxMs: 1_000 });
    expect(await p.gate(ORIGIN)).toEqual({ admitted: true, waitMs: 0 });
    expect(await p.report(ORIGIN, tooMany(), MS)).toBeUndefined();
    down.disconnect();
  });
});

describe('OriginPacer round trips (issue 26)', () => {
  const closing: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const close of closing) await close();
  });

  /** A connection of its own that counts the scripts run on it (EVALSHA, or EVAL after a NOSCRIPT). */
  function countingRedis(): { redis: RedisClient; scripts: () => number } {
    const own = redis.duplicate();
    closing.push(() => own.disconnect());
    let scripts = 0;
    const send = own.sendCommand.bind(own);
    own.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
      if (command.name === 'evalsha' || command.name === 'eval') scripts++;
      return (send as (...args: unknown[]) => unknown)(command, ...rest);
    }) as typeof own.sendCommand;
    return { redis: own, scripts: () => scripts };
  }

  /** Pacers on one prefix, each with a connection of its own (two executors), `freeForMs` as given. */
  function executors(count: number, options: Partial<OriginPacerOptions> = {}) {
    const prefix = `t:${randomBytes(6).toString('hex')}:pace:`;
    prefixes.push(prefix);
    return Array.from({ length: count }, () => {
      const own = countingRedis();
      const p = new OriginPacer({
        redis: own.redis,
        prefix,
        maxLimit: 8,
        retryAfterMaxMs: 3_600_000,
        ...options,
      });
      closing.unshift(() => p.close());
      return { p, scripts: own.scripts };
    });
  }

  /**
   * Whether the pacer comes to hold a local permission for ORIGIN (its first gate asks Redis, and is
   * granted one once the pacer listens): a gate then makes no script call.
   */
  function holdsPermission(executor: { p: OriginPacer; scripts: () => number }): Promise<boolean> {
    return eventually(async () => {
      await executor.p.gate(ORIGIN);
      const before = executor.scripts();
      await executor.p.gate(ORIGIN);
      return executor.scripts() === before;
    });
  }

  /** `ask` again until it says true; false when `tries` × 10 ms pass first. */
  async function eventually(ask: () => Promise<boolean>, tries = 300): Promise<boolean> {
    for (let i = 0; i < tries; i++) {
      if (await ask()) return true;
      await sleep(10);
    }
    return false;
  }

  it('reports the answers of one origin in one turn of the event loop with one script call, applied in order as one by one', async () => {
    const [batched, single] = executors(2);
    if (!batched || !single) throw new Error('two pacers');
    const latencies = [12, 9, 15, 11, 10, 13, 9, 14, 10, 11];
    // Warm: the script loaded; a 5xx cuts the limit under its ceiling (so that each answer moves
    // it), an answer sets the floor. Each batch answer found room (not `full`): no probe starts,
    // however long the test takes.
    const slot = { inFlight: 1, full: false };
    const failed: PacedOutcome = { kind: 'response', status: 500, headers: {} };
    for (const [p, origin] of [
      [batched.p, ORIGIN],
      [single.p, `${ORIGIN}1`],
    ] as const) {
      await p.report(origin, failed, 10 * MS, slot);
      await p.report(origin, ok, 10 * MS, slot);
    }
    const before = batched.scripts();
    const reports = await Promise.all(latencies.map((ms) => batched.p.report(ORIGIN, ok, ms * MS, slot)));
    expect(batched.scripts() - before).toBe(1);
    const oneByOne = [];
    for (const ms of latencies) oneByOne.push(await single.p.report(`${ORIGIN}1`, ok, ms * MS, slot));
    // Each caller has its own reply, as if reported alone: the limit after its answer.
    expect(reports).toEqual(oneByOne);
    expect(new Set(reports.map((r) => r?.limit)).size).toBe(latencies.length);
    const [a, b] = [await batched.p.snapshot(ORIGIN), await single.p.snapshot(`${ORIGIN}1`)];
    expect([a.limit, a.floorMs, a.recentMs]).toEqual([b.limit, b.floorMs, b.recentMs]);
  });

  it("keeps a free origin's answers that are no news for reportEveryMs, and reports them with the first news at once", async () => {
    const [executor] = executors(1, { reportEveryMs: 60_000, freeForMs: 60_000 });
    if (!executor) throw new Error('a pacer');
    const { p, scripts } = executor;
    await p.report(`${ORIGIN}2`, tooMany(), 10 * MS); // warm: the report script loaded (news: at once)
    expect(await holdsPermission(executor)).toBe(true);
    const before = scripts();
    let answered = 0;
    const waiting = [12, 9, 15].map((ms) => p.report(ORIGIN, ok, ms * MS).then(() => answered++));
    await sleep(200);
    expect([scripts() - before, answered]).toEqual([0, 0]);
    // A slow-down is news for every executor: sent at once, with the answers before it.
    const slowed = await p.report(ORIGIN, { kind: 'response', status: 503, headers: {} }, 10 * MS);
    await Promise.all(waiting);
    expect([scripts() - before, answered, slowed?.kind]).toEqual([1, 3, 'overload']);
    // Closing reports what still waits.
    const last = p.report(ORIGIN, ok, 10 * MS);
    await p.close();
    expect(await last).toMatchObject({ kind: 'ok' });
    expect(scripts() - before).toBe(2);
  });

  it("reports a paced origin's answers at the next turn, not after reportEveryMs: its pace and served rate read them by their time", async () => {
    const [executor] = executors(1, { reportEveryMs: 60_000, freeForMs: 60_000 });
    if (!executor) throw new Error('a pacer');
    const { p, scripts } = executor;
    await p.report(ORIGIN, tooMany(), 10 * MS); // held, then paced: not free
    const before = scripts();
    // Well within the test's timeout, not 60 s.
    expect(await p.report(ORIGIN, ok, 10 * MS)).toMatchObject({ kind: 'ok' });
    expect(scripts() - before).toBe(1);
  });

  it('reports answers that are no news within reportEveryMs without any other call', async () => {
    const [executor] = executors(1, { reportEveryMs: 50 });
    if (!executor) throw new Error('a pacer');
    const { p, scripts } = executor;
    await p.report(ORIGIN, ok, 10 * MS);
    const before = scripts();
    const reports = await Promise.all([p.report(ORIGIN, ok, 10 * MS), p.report(`${ORIGIN}1`, ok, 10 * MS)]);
    expect(reports.map((r) => r?.kind)).toEqual(['ok', 'ok']);
    expect(scripts() - before).toBe(2); // one per origin
  });

  it('moves the limit by half a call per round of the calls of every executor applying it, not per executor', async () => {
    // Each executor applies the whole limit: with two, a round is twice the limit's calls.
    const still = { loopLagMs: () => 0, maxLimit: 16 };
    const grown = async (pacers: OriginPacer[]) => {
      const failed: PacedOutcome = { kind: 'response', status: 500, headers: {} };
      const [first] = pacers;
      if (!first) throw new Error('a pacer');
      const slot = { inFlight: 1, full: false };
      await first.report(ORIGIN, failed, 10 * MS, slot); // under its ceiling: 16 × 0.7
      for (const p of pacers) await p.report(ORIGIN, ok, 10 * MS, slot); // the floor, then a step
      const from = (await first.snapshot(ORIGIN)).limit ?? Number.NaN;
      for (let i = 0; i < 24; i++) await pacers[i % pacers.length]?.report(ORIGIN, ok, 10 * MS, slot);
      return ((await first.snapshot(ORIGIN)).limit ?? Number.NaN) - from;
    };
    const alone = await grown(executors(1, still).map((e) => e.p));
    const two = await grown(executors(2, still).map((e) => e.p));
    // 24 answers within the bound at a limit of ~11.5: ~2 rounds of one executor, ~1 of two; half
    // a call a round.
    expect(alone).toBeGreaterThan(0.95);
    expect(two).toBeGreaterThan(0.45);
    expect(two).toBeLessThan(0.6);
  });

  it('reports a 429 at once, not with the answers after it', async () => {
    const [one] = executors(1);
    if (!one) throw new Error('a pacer');
    await one.p.report(ORIGIN, ok, MS);
    const before = one.scripts();
    const [refused] = await Promise.all([
      one.p.report(ORIGIN, tooMany({ 'retry-after': '5' }), MS),
      one.p.report(ORIGIN, ok, MS),
      one.p.report(ORIGIN, ok, MS),
    ]);
    expect(refused).toMatchObject({ kind: 'slow', throttled: true });
    expect(one.scripts() - before).toBe(2);
  });

  it('lets calls to a free origin leave without a gate round trip, and counts them with the next report (the rate a 429 cuts)', async () => {
    const [one] = executors(1, { freeForMs: 60_000 });
    if (!one) throw new Error('a pacer');
    expect(await holdsPermission(one)).toBe(true);
    const before = one.scripts();
    for (let i = 0; i < 40; i++) expect(await one.p.gate(ORIGIN)).toEqual({ admitted: true, waitMs: 0 });
    expect(one.scripts()).toBe(before);
    // Unpaced, no RateLimit-Policy, nothing served: the pace falls to 70 % of the rate sent, which
    // counts the 40 calls sent without a gate (one counted alone: at most 0.7 × 4/s).
    const report = await one.p.report(ORIGIN, tooMany({ 'retry-after': '1' }), MS);
    expect(report?.rate).toBeGreaterThan(0.7 * 40);
    // Held now: the next gate asks Redis again.
    expect((await one.p.gate(ORIGIN)).admitted).toBe(false);
  });

  it("ends another executor's permission when a 429 holds the origin: its next calls are held", async () => {
    const [a, b] = executors(2, { freeForMs: 60_000, maxLocalWaitMs: 0 });
    if (!a || !b) throw new Error('two pacers');
    expect(await holdsPermission(a)).toBe(true);
    await b.p.report(ORIGIN, tooMany({ 'retry-after': '30' }), MS);
    // Heard through the announcement, well within the permission's 60 s.
    expect(await eventually(async () => !(await a.p.gate(ORIGIN)).admitted)).toBe(true);
  });

  it("ends another executor's permission when a probe of the floor starts: it learns the probe's limit of 1", async () => {
    const [a, b] = executors(2, { freeForMs: 60_000 });
    if (!a || !b) throw new Error('two pacers');
    await b.p.report(ORIGIN, ok, 5 * MS, { inFlight: 1, full: true });
    expect(await holdsPermission(a)).toBe(true);
    expect(a.p.limitOf(ORIGIN)).toBe(8);
    await b.p.probe(ORIGIN);
    await b.p.report(ORIGIN, ok, 5 * MS, { inFlight: 8, full: true });
    expect((await b.p.snapshot(ORIGIN)).probing).toBe(true);
    expect(
      await eventually(async () => {
        await a.p.gate(ORIGIN);
        return a.p.limitOf(ORIGIN) === 1;
      }),
    ).toBe(true);
  });
});

/** A call to ORIGIN as the executor makes it: through the gate (it counts the rate we send at), then reported. */
async function call(p: OriginPacer, latencyMs: number): Promise<void> {
  await p.gate(ORIGIN);
  await p.report(ORIGIN, ok, latencyMs * MS);
}

/** A call through the gate, reported with its bulkhead slot. */
async function gateAndReport(p: OriginPacer, latencyMs: number, slot: PaceSlot): Promise<void> {
  await p.gate(ORIGIN);
  await p.report(ORIGIN, ok, latencyMs * MS, slot);
}

/**
 * An origin's first answer, then the probe of its floor that answer schedules a second later, run
 * at once: on a loaded box the rounds a test reports next can take longer than that second, and a
 * probe starting among them holds the limit at 1. The next probe is 10 s away.
 */
async function firstAnswer(p: OriginPacer, latencyMs: number): Promise<void> {
  await p.report(ORIGIN, ok, latencyMs * MS);
  await p.probe(ORIGIN);
  await reportUntil(p, latencyMs, async () => (await p.snapshot(ORIGIN)).probing === true);
  await reportUntil(p, latencyMs, async () => !(await p.snapshot(ORIGIN)).probing);
}

/** Reports successes of `latencyMs` until `done` holds (the probe counts them by Redis time). */
async function reportUntil(p: OriginPacer, latencyMs: number, done: () => Promise<boolean>): Promise<void> {
  for (let i = 0; !(await done()); i++) {
    if (i > 10_000) throw new Error('not reached in 10,000 reports');
    await p.report(ORIGIN, ok, latencyMs * MS);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/**
 * `workers` callers of `url` in a closed loop, each starting a call only while fewer than the
 * pacer's limit (at most `ceiling`) are in flight (the executor's bulkhead, in short), and
 * reporting every answer, with whether it took the last slot:
 * `limits` holds the limit after each report.
 */
function closedLoop(p: OriginPacer, url: string, workers: number, ceiling = 16) {
  const origin = originOf(url);
  const limits: number[] = [];
  let inFlight = 0;
  let stopped = false;
  let failure: unknown;
  const worker = async (id: number) => {
    for (let n = 0; !stopped; n++) {
      const limit = Math.min(ceiling, p.limitOf(origin) ?? ceiling);
      if (inFlight >= limit) {
        await new Promise((resolve) => setTimeout(resolve, 1));
        continue;
      }
      inFlight++;
      const slot = { inFlight, full: inFlight >= limit }; // what the bulkhead grants
      await p.gate(origin); // unpaced: go at once; it counts the rate we send at
      const started = process.hrtime.bigint();
      const response = await fetch(`${url}/${id}/${n}`);
      await response.text();
      const latencyNs = Number(process.hrtime.bigint() - started);
      inFlight--;
      await p.report(origin, { kind: 'response', status: response.status, headers: {} }, latencyNs, slot);
      limits.push((await p.snapshot(origin)).limit ?? Number.NaN);
    }
  };
  const running = Promise.all(Array.from({ length: workers }, (_, id) => worker(id))).catch((err) => {
    failure = err;
  });
  return {
    limits,
    /** Waits until `done(limits)` holds; bounded by calls (60,000), not by time. */
    async until(done: (limits: number[]) => boolean | Promise<boolean>): Promise<void> {
      while (!(await done(limits))) {
        if (failure) throw failure;
        if (limits.length > 60_000) throw new Error('not reached in 60,000 calls');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async stop(): Promise<void> {
      stopped = true;
      await running;
    },
  };
}

/**
 * The highest limit the rule lets a closed loop settle at: the recent latency may reach TOLERANCE ×
 * floor + SLACK + the caller's lag (includes/limit.lua), and a target serving `concurrent` calls in
 * `serviceMs` answers L calls in flight in L / concurrent × serviceMs (Little's law, once queued).
 * Plus 3: the limit's steps around that point, and the calls holding a slot in the caller (its
 * gate's round trip) rather than at the target (a quiet run settles ~1.3 above the bound). A loaded
 * caller's lag lets a longer queue through: the band follows the lag the pacer was given.
 */
async function allowedLimit(
  p: OriginPacer,
  origin: string,
  concurrent: number,
  serviceMs: number,
  lagMs: number,
): Promise<number> {
  const floorMs = Math.max(serviceMs, (await p.snapshot(origin)).floorMs ?? serviceMs);
  const boundMs = 1.25 * floorMs + 0.5 + lagMs;
  return (boundMs * concurrent) / serviceMs + 3;
}
