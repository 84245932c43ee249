import { RateLimiter } from '@requester/policies';
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
});
