import { FairQueue, type LeasedTask } from '@requester/queue';
import type { KafkaProducer, KafkaRecord } from '@requester/shared/kafka';
import { Outbox } from '@requester/shared/outbox';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { decodeQueuedTask } from '@requester/shared/task';
import {
  createTestTopics,
  eventually,
  readTopic,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BODY_OF_HEADER } from './bodies.ts';
import type { Router } from './index.ts';
import { testRouter } from './router.fixture.ts';

// Big records an outside producer batched together are copied to the bodies topic, one batch
// each, and their tasks point there; Requester's own writers' records and small ones are not.
describe('router: copies of big batched records (ROUTER_BODY_COPIES)', () => {
  const name = uniqueName('bodies');
  const topicIn = `${name}.in`;
  const topicOut = `${name}.out`;
  const topicBodies = `${name}.in.bodies`;
  let redis: RedisClient;
  let queue: FairQueue;
  let pg: Awaited<ReturnType<typeof testPg>>;
  let outbox: Outbox;
  let producer: KafkaProducer;
  const routers: Router[] = [];

  function startRouter(from = topicIn, bodies = topicBodies, groupId = uniqueName('group')): Promise<void> {
    const router = testRouter({
      groupId,
      queue,
      outbox,
      producer,
      topicIn: from,
      topicOut,
      topicBodies: bodies,
    });
    routers.push(router);
    return router.start();
  }

  beforeAll(async () => {
    await createTestTopics([topicIn, `${topicIn}2`, topicOut, topicBodies], 2);
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    queue = new FairQueue({ redis, prefix: `${name}:`, shards: 4, refreshMs: 0 });
    pg = await testPg();
    outbox = new Outbox(pg.sql);
    producer = testKafka().producer();
    await producer.connect();
  });

  afterAll(async () => {
    await Promise.all(routers.map((r) => r.stop()));
    await producer.disconnect();
    const keys = await redis.keys(`${name}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await pg.drop();
  });

  const request = (requestId: string, bodyBytes: number) =>
    JSON.stringify({
      request: { uri: 'https://example.com/x', method: 'POST', body: 'x'.repeat(bodyBytes) },
      meta: { requestId },
    });

  async function leaseAll(n: number): Promise<LeasedTask[]> {
    const leased: LeasedTask[] = [];
    await eventually(
      async () => {
        leased.push(...(await queue.lease(50, 30_000)).tasks);
        return leased.length >= n;
      },
      30_000,
      `${n} tasks leased`,
    );
    return leased;
  }

  it('points the tasks of big records batched by their producer at copies alone in their batches', async () => {
    // One send to one partition without readByOffset: a single record batch of 8 × 16 KiB, as an
    // outside producer writes (kafkajs: a send's records of a partition are one batch).
    const batched = Array.from({ length: 8 }, (_, i) => ({
      key: `big-${i}`,
      value: request(`big-${i}`, 16_384),
      partition: 0,
      headers: { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` },
    }));
    await producer.send(topicIn, batched);
    // Requester's own writer keeps a big record's batch small: read where it is.
    await producer.send(topicIn, [{ key: 'own', value: request('own', 16_384), partition: 1 }], undefined, {
      readByOffset: true,
    });
    // Small records batched together: cheap to read where they are (and they ride inline).
    await producer.send(
      topicIn,
      Array.from({ length: 4 }, (_, i) => ({
        key: `small-${i}`,
        value: request(`small-${i}`, 100),
        partition: 1,
      })),
    );
    await startRouter();
    const leased = await leaseAll(13);
    const tasks = new Map(leased.map((t) => [t.id, decodeQueuedTask(t.payload)]));

    for (let i = 0; i < 8; i++) {
      const task = tasks.get(`big-${i}:0`);
      expect(task?.ref.topic).toBe(topicBodies);
      expect(task?.entryTopic).toBe(topicIn);
    }
    for (const id of ['own:0', 'small-0:0', 'small-3:0']) {
      expect(tasks.get(id)?.ref.topic).toBe(topicIn);
      expect(tasks.get(id)?.entryTopic).toBeUndefined();
    }

    // Each copy is the record (key, value, headers) and sits alone in its record batch; the copies
    // of one consumed batch are spread over the bodies topic's partitions (sent a round at a time).
    const copies = await readTopic(topicBodies, (m) => m.length >= 8);
    expect(copies).toHaveLength(8);
    expect(new Set(copies.map((copy) => copy.partition))).toEqual(new Set([0, 1]));
    for (const copy of copies) {
      expect(copy.batch?.records).toBe(1);
      const source = batched.find((b) => b.key === copy.key?.toString());
      expect(copy.value?.toString()).toBe(source?.value);
      expect(copy.headers.traceparent?.toString()).toBe(source?.headers.traceparent);
      expect(copy.headers[BODY_OF_HEADER]?.toString()).toMatch(new RegExp(`^${topicIn}/0/\\d+$`));
    }
    const fetcher = testKafka().fetcher();
    try {
      const ref = tasks.get('big-3:0')?.ref;
      const [fetched] = await fetcher.fetchMany(ref ? [ref] : []);
      expect(fetched?.ok && fetched.record.value?.toString()).toBe(batched[3]?.value);
    } finally {
      await fetcher.close();
    }

    // The consumer saw the producer's batch as one: 8 records, over 128 KiB.
    const read = await readTopic(topicIn, (m) => m.length >= 13);
    const big = read.find((r: KafkaRecord) => r.key?.toString() === 'big-0');
    expect(big?.batch?.records).toBe(8);
    expect(big?.batch?.bytes).toBeGreaterThan(8 * 16_384);
    expect(read.find((r) => r.key?.toString() === 'own')?.batch?.records).toBe(1);

    // A router that dies after the copies, before its commit: the batch is read again, copied
    // again, and the same task ids are refused by the queue. An unread copy is the only trace.
    const replay = uniqueName('replay');
    await startRouter(topicIn, topicBodies, replay);
    const admin = testKafka().admin();
    await admin.connect();
    try {
      await eventually(
        async () => {
          const offsets = await admin.committedOffsets(replay, topicIn);
          return offsets.reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0) === 13;
        },
        30_000,
        'the replay committed all 13 records',
      );
    } finally {
      await admin.disconnect();
    }
    expect(await readTopic(topicBodies, (m) => m.length >= 16)).toHaveLength(16);
    expect((await queue.lease(50, 30_000)).tasks).toEqual([]);
  });

  it('leaves the tasks on their in records when the copy fails (here: no bodies topic)', async () => {
    const from = `${topicIn}2`;
    await producer.send(
      from,
      Array.from({ length: 6 }, (_, i) => ({
        key: `lost-${i}`,
        value: request(`lost-${i}`, 16_384),
        partition: 0,
      })),
    );
    await startRouter(from, `${name}.no-such-topic`);
    const leased = await leaseAll(6);
    for (const task of leased.map((t) => decodeQueuedTask(t.payload))) {
      expect(task.ref.topic).toBe(from);
      expect(task.entryTopic).toBeUndefined();
    }
  });
});
