import { CircuitBreaker } from '@requester/policies';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANSWER, request, walkThrough } from '../walk.fixture.ts';
import { breaker } from './breaker.ts';

describe('the breaker gate (real Redis)', () => {
  let redis: RedisClient;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  });
  afterAll(() => redis.disconnect());

  it('passes without a breaker', async () => {
    expect((await walkThrough(breaker).run(request())).answer).toBe(ANSWER);
  });

  it('admits the calls of a closed origin, keeping the admission for the report', async () => {
    const circuit = new CircuitBreaker({
      redis,
      prefix: `${uniqueName('gate-breaker')}:`,
      failureThreshold: 3,
      openMs: 60_000,
      stateCacheMs: 0,
    });
    const walk = walkThrough(breaker, { breaker: circuit });
    const { answer, attempt } = await walk.run(request());
    expect(answer).toBe(ANSWER);
    expect(attempt.admission).toMatchObject({ admitted: true });
  });

  it('makes the calls of an open origin wait, unattempted', async () => {
    const circuit = new CircuitBreaker({
      redis,
      prefix: `${uniqueName('gate-breaker')}:`,
      failureThreshold: 1,
      openMs: 60_000,
      stateCacheMs: 0,
    });
    const origin = 'http://127.0.0.1:9';
    const [admission] = await circuit.admitMany([{ origin, caller: '' }]);
    if (!admission?.admitted) throw new Error('a new origin admits its first call');
    await circuit.recordMany([{ origin, ...admission, success: false }]);
    const walk = walkThrough(breaker, { breaker: circuit });
    const { answer } = await walk.run(request());
    expect(answer).toMatchObject({ kind: 'failure', stop: { kind: 'wait', reason: 'circuit_open' } });
    expect(walk.reached).toHaveLength(0);
  });
});
