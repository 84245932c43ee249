import { createRedis, type RedisClient } from '@requester/shared/redis';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResponseCache } from '../../cache/index.ts';
import type { CallOrRefusal } from '../outcome.ts';
import { ANSWER, request, walkThrough } from '../walk.fixture.ts';
import { cache } from './cache.ts';

describe('the cache gate (real Redis)', () => {
  let redis: RedisClient;
  let responses: ResponseCache<CallOrRefusal>;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    responses = new ResponseCache<CallOrRefusal>({
      redis,
      prefix: `${uniqueName('gate-cache')}:`,
      waitBudgetMs: 30_000,
    });
  });
  afterAll(async () => {
    await responses.close();
    redis.disconnect();
  });

  const cached = () => ({ cache: { key: uniqueName('k'), ttl: '1m' } });

  it('passes a request that does not ask for the cache', async () => {
    const walk = walkThrough(cache, { cache: responses });
    const { answer, attempt } = await walk.run(request());
    expect(answer).toBe(ANSWER);
    expect(attempt.cache).toBeUndefined();
  });

  it('fills a miss through the gates after it, then answers the same request from the cache', async () => {
    const walk = walkThrough(cache, { cache: responses });
    const meta = cached();
    const first = await walk.run(request(meta));
    expect(first.answer).toBe(ANSWER);
    expect(first.attempt.cache).toBeUndefined();
    const again = await walk.run(request(meta));
    expect(again.answer).toMatchObject({ kind: 'response', status: 200, body: 'ok' });
    expect(again.attempt.cache).toBe('hit');
    expect(walk.reached).toHaveLength(1);
  });

  it('coalesces concurrent misses of one key into one walk through the gates', async () => {
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    const walk = walkThrough(cache, { cache: responses }, () => answered.then(() => ANSWER));
    const meta = cached();
    const both = Promise.all([walk.run(request(meta)), walk.run(request(meta))]);
    while (walk.reached.length === 0) await new Promise((resolve) => setImmediate(resolve));
    answer();
    const marks = (await both).map(({ attempt }) => attempt.cache).sort();
    expect(marks).toEqual(['coalesced', undefined]);
    expect(walk.reached).toHaveLength(1);
  });

  it('stores no refusal: the next request walks the gates again', async () => {
    const walk = walkThrough(cache, { cache: responses }, async () => ({
      kind: 'failure',
      stop: { kind: 'wait', delayMs: 1_000, reason: 'rate_limited' },
    }));
    const meta = cached();
    await walk.run(request(meta));
    await walk.run(request(meta));
    expect(walk.reached).toHaveLength(2);
  });
});
