import { OriginPacer } from '@requester/policies';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANSWER, request, walkThrough } from '../walk.fixture.ts';
import { pace } from './pace.ts';

describe('the pace gate (real Redis)', () => {
  let redis: RedisClient;
  let pacer: OriginPacer;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    pacer = new OriginPacer({
      redis,
      prefix: `${uniqueName('gate-pace')}:`,
      maxLimit: 8,
      retryAfterMaxMs: 600_000,
    });
  });
  afterAll(async () => {
    await pacer?.close();
    redis.disconnect();
  });

  it('passes without a pacer, and at an origin nobody asked to slow down', async () => {
    expect((await walkThrough(pace).run(request())).answer).toBe(ANSWER);
    const walk = walkThrough(pace, { pacer });
    expect((await walk.run(request({}, 'http://127.0.0.1:10/free'))).answer).toBe(ANSWER);
  });

  it('makes the calls of an origin that answered 429 with Retry-After wait, unattempted', async () => {
    const origin = 'http://127.0.0.1:11';
    const tooMany = { kind: 'response' as const, status: 429, headers: { 'retry-after': '300' } };
    await pacer.report(origin, tooMany, 1e6);
    const walk = walkThrough(pace, { pacer });
    const { answer } = await walk.run(request({}, `${origin}/held`));
    expect(answer).toMatchObject({ kind: 'failure', stop: { kind: 'wait', reason: 'paced' } });
    expect(walk.reached).toHaveLength(0);
  });
});
