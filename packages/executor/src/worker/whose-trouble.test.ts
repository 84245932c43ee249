import { CircuitBreaker, originOf } from '@requester/policies';
import type { RequestEnvelope, RequestEnvelopeInput } from '@requester/shared/contract';
import type { Journal, JournalEventInput } from '@requester/shared/journal';
import { startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from './harness.fixture.ts';
import { paceIdentity } from './policies.ts';

/**
 * One caller's trouble stays its own (docs/architecture.md §9, "whose trouble"), through a real
 * executor, queue, Kafka and a loopback target: A's 429 + Retry-After holds A's credential, not B's;
 * A's 500s open A's breaker, not the origin's; a receiver's opt-out answered to B holds B, not A;
 * and an outage (several clients' calls fail) still opens the origin for everyone.
 */
describe('whose trouble: one caller, or the origin (end to end through the executor)', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  function recordingJournal(): Journal & { events: JournalEventInput[] } {
    const events: JournalEventInput[] = [];
    return { events, emit: (event) => void events.push(event), close: async () => {} };
  }

  /** An executor with the role's pacer and breaker (long holds and open periods: a wait would show). */
  async function start() {
    const target = await startTarget();
    h.onClose(() => target.close());
    const pacer = h.pacer();
    const breaker = new CircuitBreaker({
      redis: h.redis,
      prefix: h.prefix('breaker'),
      failureThreshold: 5,
      openMs: 600_000,
      // No local cache: a call right after another sees the shared state, not what was cached.
      stateCacheMs: 0,
      holdPeriodMs: 1_000,
    });
    const journal = recordingJournal();
    const { queue } = h.startExecutor({ pacer, breaker, journal, optOut: true, maxWorkers: 8 });
    return { target, pacer, breaker, journal, queue };
  }

  const call = (
    target: Target,
    client: string,
    path: string,
    headers?: Record<string, string>,
  ): RequestEnvelopeInput => {
    const requestId = uniqueName(client);
    const sep = path.includes('?') ? '&' : '?';
    return {
      request: { uri: `${target.url}${path}${sep}id=${requestId}`, ...(headers ? { headers } : {}) },
      meta: { requestId, client, retry: { max: 1 } },
    };
  };

  const heldEvents = (journal: { events: JournalEventInput[] }, e: RequestEnvelopeInput) =>
    journal.events.filter((j) => j.type === 'held' && j.requestId === e.meta.requestId);

  it("A's 429 + Retry-After holds A's credential only: B's call to the same origin goes at once", async () => {
    const { target, pacer, journal, queue } = await start();
    const origin = originOf(target.url);
    const tooMany = call(target, 'a', '/status/429?retry-after=1200', { authorization: 'Bearer token-of-a' });
    await h.submit(queue, [tooMany]);
    expect((await h.resultOf(tooMany.meta.requestId)).response.status).toBe(429);

    const other = call(target, 'b', '/echo', { authorization: 'Bearer token-of-b' });
    await h.submit(queue, [other]);
    const answered = await h.resultOf(other.meta.requestId);
    expect([answered.response.status, answered.meta.tryCount, answered.meta.waitTime]).toEqual([200, 1, 0]);
    expect(heldEvents(journal, other)).toEqual([]);
    // A's hold still stands, for A's next call alone.
    const again = call(target, 'a', '/echo', { authorization: 'Bearer token-of-a' });
    await h.submit(queue, [again]);
    await h.until(() => (heldEvents(journal, again).length > 0 ? true : undefined));
    expect(heldEvents(journal, again)[0]).toMatchObject({ by: 'pacing' });
    expect(target.calls.some((c) => c.path.includes(again.meta.requestId))).toBe(false);
    // The hold is kept under A's identity (a hash of its Authorization), not the origin's.
    const identityA = paceIdentity(tooMany as RequestEnvelope);
    expect((await pacer.snapshot(origin, identityA)).holdUntilMs).toBeGreaterThan(Date.now());
    expect((await pacer.snapshot(origin)).holdUntilMs).toBeUndefined();
  }, 60_000);

  it('keys a pace by the named credential or a hash of the Authorization header, never the secret', () => {
    const envelope = (meta: object, headers?: Record<string, string>) =>
      ({
        request: { uri: 'http://x/', ...(headers ? { headers } : {}) },
        meta,
      }) as unknown as RequestEnvelope;
    expect(paceIdentity(envelope({ credentials: 'partner-pay' }, { Authorization: 'Bearer s3cret' }))).toBe(
      'c:partner-pay',
    );
    const hashed = paceIdentity(envelope({}, { Authorization: 'Bearer s3cret' }));
    expect(hashed).toMatch(/^a:[\w-]{22}$/);
    expect(hashed).not.toContain('s3cret');
    expect(paceIdentity(envelope({}, { authorization: 'Bearer other' }))).not.toBe(hashed);
    expect(paceIdentity(envelope({}, { accept: 'text/plain' }))).toBeUndefined();
  });

  it("A's 500s open A's own breaker: B's call to the same origin is not held, A's next one is", async () => {
    const { target, breaker, journal, queue } = await start();
    const origin = originOf(target.url);
    const first = call(target, 'b', '/echo');
    await h.submit(queue, [first]);
    expect((await h.resultOf(first.meta.requestId)).response.status).toBe(200);

    const failing = Array.from({ length: 8 }, () => call(target, 'a', '/status/500'));
    await h.submit(queue, failing);
    for (const e of failing) expect((await h.resultOf(e.meta.requestId)).response.status).toBe(500);
    expect(await breaker.snapshot(origin, 'a')).toMatchObject({ state: 'open' });

    const other = call(target, 'b', '/echo');
    await h.submit(queue, [other]);
    const answered = await h.resultOf(other.meta.requestId);
    expect([answered.response.status, answered.meta.tryCount, answered.meta.waitTime]).toEqual([200, 1, 0]);
    expect(heldEvents(journal, other)).toEqual([]);
    expect(await breaker.openOrigins()).toEqual([]);

    const again = call(target, 'a', '/echo');
    await h.submit(queue, [again]);
    await h.until(() => (heldEvents(journal, again).length > 0 ? true : undefined));
    expect(heldEvents(journal, again)[0]).toMatchObject({ by: 'breaker' });
    expect(target.calls.some((c) => c.path.includes(again.meta.requestId))).toBe(false);
  }, 60_000);

  it("a receiver's `webhook-delivery: disable` answered to B holds B alone: A's calls go on", async () => {
    const { target, breaker, journal, queue } = await start();
    const origin = originOf(target.url);
    const optOut = call(target, 'b', '/echo?webhook-delivery=disable');
    await h.submit(queue, [optOut]);
    expect((await h.resultOf(optOut.meta.requestId)).response.status).toBe(200);

    const other = call(target, 'a', '/echo');
    await h.submit(queue, [other]);
    const answered = await h.resultOf(other.meta.requestId);
    expect([answered.response.status, answered.meta.tryCount, answered.meta.waitTime]).toEqual([200, 1, 0]);
    expect(heldEvents(journal, other)).toEqual([]);
    expect(journal.events.find((e) => e.type === 'origin_failing')).toMatchObject({
      origin,
      client: 'b',
      reason: 'opt_out',
      scope: 'caller',
    });

    const again = call(target, 'b', '/echo');
    await h.submit(queue, [again]);
    await h.until(() => (heldEvents(journal, again).length > 0 ? true : undefined));
    expect(heldEvents(journal, again)[0]).toMatchObject({ by: 'hold' });
    expect(await breaker.heldOrigins()).toEqual([
      expect.objectContaining({ origin, client: 'b', reason: 'opt_out' }),
    ]);
    expect(await breaker.reset(origin)).toBe(true); // the operator's reset ends the caller's hold too
    const resumed = await h.resultOf(again.meta.requestId);
    expect(resumed.response.status).toBe(200);
  }, 60_000);

  it("an outage (A's and B's calls fail) still opens the origin's breaker for every client", async () => {
    const { target, breaker, journal, queue } = await start();
    const origin = originOf(target.url);
    const run = uniqueName('outage');
    const first = call(target, 'c', `/switch/${run}`);
    await h.submit(queue, [first]);
    expect((await h.resultOf(first.meta.requestId)).response.status).toBe(200);
    target.switches.set(run, 503);

    for (const client of ['a', 'b']) {
      const failing = Array.from({ length: 4 }, () => call(target, client, `/switch/${run}`));
      await h.submit(queue, failing);
      for (const e of failing) expect((await h.resultOf(e.meta.requestId)).response.status).toBe(503);
    }
    expect(await breaker.snapshot(origin)).toMatchObject({ state: 'open' });
    expect(await breaker.openOrigins()).toEqual([expect.objectContaining({ origin, state: 'open' })]);

    const third = call(target, 'c', `/switch/${run}`);
    await h.submit(queue, [third]);
    await h.until(() => (heldEvents(journal, third).length > 0 ? true : undefined));
    expect(heldEvents(journal, third)[0]).toMatchObject({ by: 'breaker' });
    expect(target.calls.some((c) => c.path.includes(third.meta.requestId))).toBe(false);
  }, 60_000);
});
