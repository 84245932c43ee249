import { FairQueue } from '@requester/queue';
import { Relay } from '@requester/relay';
import { Fences, type Router } from '@requester/scheduler';
import { testRouter } from '@requester/scheduler/testing';
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

/**
 * The fence of an ordered partition (docs/architecture.md §9, "Ordered partitions and time"): a
 * record of an ordered partition that reaches `in` within the horizon of its instant must not be
 * queued ahead of an earlier record of its partition still on its way through the outbox (router →
 * outbox → relay → `in` → router). The trip is held open, not raced: the relay starts only once
 * the later record was routed.
 */
describe('router and relay: the fence of an ordered partition', () => {
  const name = uniqueName('fence');
  let redis: RedisClient;
  /** The queue of the test running (each test has its own, and its own router and topics). */
  let queue: FairQueue;
  let pg: Awaited<ReturnType<typeof testPg>>;
  let outbox: Outbox;
  let producer: KafkaProducer;
  const routers: Router[] = [];
  let relay: Relay | undefined;

  /**
   * A router on topics and a queue of its own, its fences lapsing `graceMs` after their due time;
   * an empty outbox, no relay.
   */
  const startRouter = async (graceMs?: number) => {
    await stopRelay();
    await pg.sql`delete from outbox`;
    queue = new FairQueue({ redis, prefix: `${uniqueName(name)}:`, shards: 2, refreshMs: 0 });
    const topicIn = uniqueName(`${name}.in`);
    const topicOut = uniqueName(`${name}.out`);
    await createTestTopics([topicIn, topicOut], 1);
    const router = testRouter({
      queue,
      outbox,
      producer,
      topicIn,
      topicOut,
      fences: new Fences(redis, name, graceMs),
    });
    routers.push(router);
    await router.start();
    return topicIn;
  };

  const startRelay = async () => {
    relay = new Relay({
      outbox,
      producer,
      logger: silentLogger,
      workers: 2,
      batch: 50,
      produceTimeoutMs: 5_000,
      // Rows due within a minute are claimed at once: the earlier record's trip starts right away.
      stageAheadMs: 60_000,
    });
    await relay.start();
  };

  const stopRelay = async () => {
    await relay?.stop();
    relay = undefined;
  };

  const send = (topicIn: string, requestId: string, partition: string, dueAt?: number) =>
    producer.send(topicIn, [
      {
        key: partition,
        value: JSON.stringify({
          request: { uri: 'https://example.com/x' },
          meta: {
            requestId,
            partition,
            ...(dueAt === undefined ? {} : { scheduled: new Date(dueAt).toISOString() }),
          },
        }),
      },
    ]);

  /** The queued tasks' ids in the order the queue hands them out (each acked before the next). */
  const leaseInOrder = async (n: number): Promise<string[]> => {
    const ids: string[] = [];
    await eventually(
      async () => {
        const { tasks } = await queue.lease(1, 30_000);
        for (const task of tasks) {
          ids.push(task.id);
          await queue.ack(task.token);
        }
        return ids.length >= n;
      },
      60_000,
      `${n} tasks leased`,
      () => `leased: ${ids.join(', ')}`,
    );
    return ids;
  };

  const routed = (n: number, what: string) =>
    eventually(async () => (await outbox.count()) + (await queue.pendingDepth()) === n, 30_000, what);

  beforeAll(async () => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    pg = await testPg();
    outbox = new Outbox(pg.sql);
    producer = testKafka().producer();
    await producer.connect();
  });

  afterAll(async () => {
    await stopRelay();
    for (const router of routers) await router.stop();
    await producer?.disconnect();
    const keys = await redis.keys(`${name}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis?.disconnect();
    await pg?.drop();
  });

  it('queues a record behind the earlier one of its ordered partition still on its way through the outbox, then lifts the fence', async () => {
    const topicIn = await startRouter();
    const fenceKey = `${name}:fence:!p`;
    await send(topicIn, 'a', '!p', Date.now() + 5_000);
    await eventually(async () => (await outbox.count()) === 1, 30_000, 'a in the outbox');
    // b reaches `in` due now, well within the horizon, while a has not come back.
    await send(topicIn, 'b', '!p');
    await routed(2, 'b routed');
    await startRelay();
    await eventually(
      async () => (await queue.pendingDepth()) === 2 && (await outbox.count()) === 0,
      30_000,
      'both relayed and queued',
    );
    expect(await leaseInOrder(2)).toEqual(['a:0', 'b:0']);
    expect(await outbox.count(), 'nothing went round the outbox twice').toBe(0);
    // b was the fence's last: its relayed copy, queued, lifted the fence…
    await eventually(async () => (await redis.exists(fenceKey)) === 0, 30_000, 'the fence lifted');
    // …so a later record of the partition goes straight to the queue again (no relay to bring it back).
    await stopRelay();
    await send(topicIn, 'c', '!p');
    await eventually(async () => (await queue.pendingDepth()) === 1, 30_000, 'c queued');
    expect(await outbox.count()).toBe(0);
    expect(await leaseInOrder(1)).toEqual(['c:0']);
  });

  it('fences within one batch, past a poison record: the later record follows the earlier one into the outbox', async () => {
    const topicIn = await startRouter();
    const value = (requestId: string, dueAt?: number) =>
      JSON.stringify({
        request: { uri: 'https://example.com/x' },
        meta: {
          requestId,
          partition: '!batch',
          ...(dueAt === undefined ? {} : { scheduled: new Date(dueAt).toISOString() }),
        },
      });
    // One send, one batch: the fence a sets is in no Redis yet when h is decided.
    await producer.send(topicIn, [
      { key: '!batch', value: value('a2', Date.now() + 60_000) },
      { key: '!batch', value: 'not json' },
      { key: '!batch', value: value('h') },
    ]);
    await routed(2, 'a2 and h routed');
    expect(await queue.pendingDepth()).toBe(0);
    const rows = await pg.sql`select request_id, due_at from outbox order by due_at, id`;
    expect(rows.map((row) => row.request_id)).toEqual(['a2', 'h']);
    expect(rows[1]?.due_at).toEqual(rows[0]?.due_at);
    expect(JSON.parse((await redis.get(`${name}:fence:!batch`)) ?? '{}').l).toBe('h:0');
  });

  it('lets a fence lapse after its due time and grace: the partition is queued at once again', async () => {
    const topicIn = await startRouter(0);
    const fenceKey = `${name}:fence:!lapse`;
    await send(topicIn, 'd', '!lapse', Date.now() + 3_000);
    await eventually(async () => (await outbox.count()) === 1, 30_000, 'd in the outbox');
    expect(await redis.exists(fenceKey)).toBe(1);
    await eventually(async () => (await redis.exists(fenceKey)) === 0, 30_000, 'the fence lapsed');
    await send(topicIn, 'e', '!lapse');
    await eventually(async () => (await queue.pendingDepth()) === 1, 30_000, 'e queued');
    // d is still in the outbox (no relay runs): e went ahead of it, as without a fence.
    expect(await outbox.count()).toBe(1);
    expect(await leaseInOrder(1)).toEqual(['e:0']);
  });

  it('leaves unordered partitions alone: no fence, a record due now is queued at once', async () => {
    const topicIn = await startRouter();
    await send(topicIn, 'f', 'plain', Date.now() + 60_000);
    await eventually(async () => (await outbox.count()) === 1, 30_000, 'f in the outbox');
    await send(topicIn, 'g', 'plain');
    await eventually(async () => (await queue.pendingDepth()) === 1, 30_000, 'g queued');
    expect(await outbox.count()).toBe(1);
    expect(await redis.exists(`${name}:fence:plain`)).toBe(0);
  });
});
