import { FairQueue } from '@requester/queue';
import type { KafkaProducer } from '@requester/shared/kafka';
import { Outbox } from '@requester/shared/outbox';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { createTestTopics, eventually, testKafka, testPg, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Router } from './index.ts';
import { testRouter } from './router.fixture.ts';

/**
 * A router behind `in` must not split an ordered partition between the outbox and the queue: the
 * records it reads after their instant came within the horizon would be queued at once, ahead of
 * the earlier ones of their partition still waiting in the outbox (or on their way back through
 * the relay). The far-schedule benchmark saw it at load 18–23 as one pair out of order per
 * ordered partition. Here the lag is provoked, not waited for: the router is stopped between the
 * two records and started again once their instant is within the horizon.
 */
describe('router: an ordered partition read late', () => {
  const name = uniqueName('lag');
  const topicIn = `${name}.in`;
  const topicOut = `${name}.out`;
  const groupId = uniqueName('router');
  let redis: RedisClient;
  let queue: FairQueue;
  let pg: Awaited<ReturnType<typeof testPg>>;
  let outbox: Outbox;
  let producer: KafkaProducer;
  let router: Router | undefined;

  const start = async () => {
    router = testRouter({ groupId, queue, outbox, producer, topicIn, topicOut });
    await router.start();
  };

  beforeAll(async () => {
    await createTestTopics([topicIn, topicOut], 1);
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    queue = new FairQueue({ redis, prefix: `${name}:`, shards: 2, refreshMs: 0 });
    pg = await testPg();
    outbox = new Outbox(pg.sql);
    producer = testKafka().producer();
    await producer.connect();
  });

  afterAll(async () => {
    await router?.stop();
    await producer?.disconnect();
    const keys = await redis.keys(`${name}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis?.disconnect();
    await pg?.drop();
  });

  it('sends a record that was far ahead when it reached in to the outbox, behind the earlier one, however late it is read', async () => {
    const horizonMs = 1_000;
    const dueAt = Date.now() + 6_000;
    const scheduled = new Date(dueAt).toISOString();
    const record = (requestId: string) => ({
      key: '!lag',
      value: JSON.stringify({
        request: { uri: 'https://example.com/x' },
        meta: { requestId, partition: '!lag', scheduled },
      }),
    });
    await start();
    await producer.send(topicIn, [record('first')]);
    await eventually(async () => (await outbox.count()) === 1, 20_000, 'the first in the outbox');
    // The router falls behind: the second record reaches `in` while the instant is far ahead…
    await router?.stop();
    router = undefined;
    await producer.send(topicIn, [record('second')]);
    expect(
      dueAt - Date.now(),
      'the second reached in while its instant was beyond the horizon',
    ).toBeGreaterThan(horizonMs);
    // …and is read once the instant is within the horizon.
    await new Promise((resolve) => setTimeout(resolve, dueAt - horizonMs + 200 - Date.now()));
    await start();
    await eventually(
      async () => (await outbox.count()) + (await queue.pendingDepth()) === 2,
      20_000,
      'the second routed',
    );
    // Not in the queue, where it would run before the first (still in the outbox): behind it.
    expect(await queue.pendingDepth()).toBe(0);
    const rows = await pg.sql`select request_id from outbox order by due_at, id`;
    expect(rows.map((row) => row.request_id)).toEqual(['first', 'second']);
  });
});
