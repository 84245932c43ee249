import { RateLimiter } from '@requester/policies';
import type { LimiterSpec } from '@requester/shared/contract';
import { type DestinationGates, destinationLimiterKey } from '@requester/shared/destinations';
import { RequesterError } from '@requester/shared/errors';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANSWER, request, walkThrough } from '../walk.fixture.ts';
import { limit } from './limit.ts';

describe('the limit gate (real Redis)', () => {
  let redis: RedisClient;
  let limiter: RateLimiter;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    limiter = new RateLimiter({ redis, prefix: `${uniqueName('gate-limit')}:` });
  });
  afterAll(() => redis.disconnect());

  const limited = (algorithm: string, key = uniqueName('k')) => ({
    limiter: { key, algorithm, rates: [{ duration: '1m', value: 1 }] },
  });

  it('passes a request without a limit, and refuses one with a limit where there is no limiter', async () => {
    expect((await walkThrough(limit).run(request())).answer).toBe(ANSWER);
    const walk = walkThrough(limit);
    await expect(walk.run(request(limited('token-bucket')))).rejects.toBeInstanceOf(RequesterError);
    expect(walk.reached).toHaveLength(0);
  });

  it('lets the first call of a window through and makes the next one wait, unattempted', async () => {
    const walk = walkThrough(limit, { limiter });
    const meta = limited('token-bucket');
    expect((await walk.run(request(meta))).answer).toBe(ANSWER);
    const second = await walk.run(request(meta));
    expect(second.answer).toMatchObject({ kind: 'failure', stop: { kind: 'wait', reason: 'rate_limited' } });
    expect(walk.reached).toHaveLength(1);
  });

  it('refuses for good a cost no window can admit', async () => {
    const walk = walkThrough(limit, { limiter });
    const meta = limited('token-bucket');
    // The contract refuses such a cost at the edge; the gate still must not loop on one that got by.
    const envelope = request(meta);
    const spec = envelope.meta.limiter;
    if (!spec) throw new Error('the request has a limit');
    envelope.meta.limiter = { ...spec, cost: 2 };
    const { answer } = await walk.run(envelope);
    expect(answer).toMatchObject({ kind: 'failure', stop: { kind: 'deliver', deadLetter: 'permanent' } });
  });

  it('gives a two-phase slot back when a later gate refuses the call', async () => {
    const refusing = walkThrough(limit, { limiter }, async () => ({
      kind: 'failure',
      stop: { kind: 'wait', delayMs: 1_000, reason: 'circuit_open' },
    }));
    const meta = limited('sliding-window-log');
    const refused = await refusing.run(request(meta));
    expect(refused.answer).toMatchObject({ stop: { reason: 'circuit_open' } });
    expect(refused.attempt.settled).toBeUndefined();
    // The slot went back: the window's one call is still free.
    const walk = walkThrough(limit, { limiter });
    const { answer, attempt } = await walk.run(request(meta));
    expect(answer).toBe(ANSWER);
    expect(attempt.reservations).toHaveLength(1);
  });

  describe('beside a destination’s quota', () => {
    /** A destination of one call a minute, its quota shared by every caller. */
    const destinationOf = (algorithm: LimiterSpec['algorithm']): DestinationGates => ({
      name: uniqueName('dest'),
      pacing: true,
      limiter: {
        key: destinationLimiterKey(uniqueName('dest')),
        algorithm,
        rates: [{ duration: '1m', value: 1 }],
      },
    });
    const caller = (client: string, key: string, value: number) => ({
      client,
      limiter: { key, algorithm: 'sliding-window-log', rates: [{ duration: '1m', value }] },
    });

    it('a call is made only when both grant; the destination’s refusal gives the caller’s slot back', async () => {
      const walk = walkThrough(limit, { limiter });
      const destination = destinationOf('sliding-window-log');
      const first = await walk.run(request(caller('a', 'mine', 5)), { destination });
      expect(first.answer).toBe(ANSWER);
      expect(first.attempt.reservations).toHaveLength(2);
      // Another client with room of its own: the destination's one call of the minute is spent.
      const own = caller('b', uniqueName('k'), 1);
      const second = await walk.run(request(own), { destination });
      expect(second.answer).toMatchObject({
        kind: 'failure',
        stop: { kind: 'wait', reason: 'rate_limited' },
      });
      expect(walk.reached).toHaveLength(1);
      // Its own one call of the minute went back: without the destination it is still free.
      expect((await walk.run(request(own))).answer).toBe(ANSWER);
    });

    it('the caller’s refusal leaves the destination’s quota untouched', async () => {
      const walk = walkThrough(limit, { limiter });
      const destination = destinationOf('token-bucket');
      const spent = caller('a', uniqueName('k'), 1);
      expect((await walk.run(request(spent))).answer).toBe(ANSWER);
      const refused = await walk.run(request(spent), { destination });
      expect(refused.answer).toMatchObject({ kind: 'failure', stop: { reason: 'rate_limited' } });
      // The destination's one call of the minute is still there for another caller.
      expect((await walk.run(request({ client: 'b' }), { destination })).answer).toBe(ANSWER);
      expect(walk.reached).toHaveLength(2);
    });

    it('a caller’s higher rate gets no more than the destination’s', async () => {
      const walk = walkThrough(limit, { limiter });
      const destination = destinationOf('token-bucket');
      const generous = caller('a', uniqueName('k'), 50);
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => walk.run(request(generous), { destination })),
      );
      expect(answers.filter((a) => a.answer === ANSWER)).toHaveLength(1);
    });
  });
});
