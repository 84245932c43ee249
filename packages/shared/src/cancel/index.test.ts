import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../redis/index.ts';
import { uniqueName } from '../testing/index.ts';
import { Cancellations } from './index.ts';

describe('Cancellations.findMany', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  const prefix = uniqueName('cancel-test');
  const cancels = new Cancellations(redis, prefix, 60_000);
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('answers each request as find does, in order', async () => {
    const { cancellation } = await cancels.record('billing', 'r-1', 'client:billing');
    await cancels.record(undefined, 'r-2', 'cli:ops');
    const asked = [
      { client: 'billing', requestId: 'r-1' }, // cancelled
      { client: 'other', requestId: 'r-1' }, // another client's r-1: not cancelled
      { client: undefined, requestId: 'r-2', createdAtMs: cancellation.at - 1 }, // accepted before
      { client: undefined, requestId: 'r-2', createdAtMs: Date.now() + 60_000 }, // accepted after
      { client: 'billing', requestId: 'never' },
    ];
    const many = await cancels.findMany(asked);
    const one = await Promise.all(asked.map((r) => cancels.find(r.client, r.requestId, r.createdAtMs)));
    expect(many).toEqual(one);
    expect(many.map((c) => c?.by)).toEqual(['client:billing', undefined, 'cli:ops', undefined, undefined]);
    expect(await cancels.findMany([])).toEqual([]);
  });
});
