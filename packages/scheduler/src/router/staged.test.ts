import { randomBytes } from 'node:crypto';
import { FairQueue } from '@requester/queue';
import { EntrySigner } from '@requester/shared/entry';
import { RELAY_DUE_AT_HEADER, RELAYED_FROM_HEADER } from '@requester/shared/journal';
import type { KafkaProducer } from '@requester/shared/kafka';
import { Outbox } from '@requester/shared/outbox';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import {
  createTestTopics,
  eventually,
  silentLogger,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Router } from './index.ts';

/**
 * Outbox rows the relay stages ahead of their due time (RELAY_STAGE_AHEAD) come back on `in` with
 * their due time in a header: the router queues a signed one for that instant, and believes the
 * header of no record a producer wrote straight to `in`.
 */
describe('router: staged outbox rows', () => {
  const name = uniqueName('staged');
  const topicIn = `${name}.in`;
  const topicOut = `${name}.out`;
  const signer = new EntrySigner(randomBytes(32));
  let redis: RedisClient;
  let queue: FairQueue;
  let pg: Awaited<ReturnType<typeof testPg>>;
  let outbox: Outbox;
  let producer: KafkaProducer;
  let router: Router;

  beforeAll(async () => {
    await createTestTopics([topicIn, topicOut], 1);
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    queue = new FairQueue({ redis, prefix: `${name}:`, shards: 2, refreshMs: 0 });
    pg = await testPg();
    outbox = new Outbox(pg.sql);
    producer = testKafka().producer();
    await producer.connect();
    router = new Router({
      consumer: testKafka().consumer({ groupId: uniqueName('router') }),
      queue,
      outbox,
      producer,
      topicIn,
      topicOut,
      horizonMs: 1_000,
      produceTimeoutMs: 5_000,
      logger: silentLogger,
      entry: { signer, clients: { scopes: async () => new Map<string, readonly string[]>() } },
    });
    await router.start();
  });

  afterAll(async () => {
    await router?.stop();
    await producer?.disconnect();
    const keys = await redis.keys(`${name}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis?.disconnect();
    await pg?.drop();
  });

  it('queues a signed relayed record for its due time (not leasable before it); an unsigned one with the same headers goes to the outbox', async () => {
    const due = new Date(Date.now() + 10 * 60_000).toISOString();
    const value = (requestId: string) =>
      JSON.stringify({ request: { uri: 'https://example.com/x' }, meta: { requestId, scheduled: due } });
    const headers = { [RELAYED_FROM_HEADER]: 'outbox', [RELAY_DUE_AT_HEADER]: due };
    await producer.send(topicIn, [
      { key: 'signed', value: value('signed'), headers: signer.signed(value('signed'), headers) },
      { key: 'forged', value: value('forged'), headers },
    ]);
    await eventually(
      async () => (await queue.pendingDepth()) === 1 && (await outbox.count()) === 1,
      20_000,
      'one queued, one in the outbox',
    );
    const [row] = await pg.sql`select request_id from outbox`;
    expect(row?.request_id).toBe('forged');
    // In Redis, waiting for its instant: nothing to lease now.
    expect((await queue.lease(10, 30_000)).tasks).toEqual([]);
  });
});
