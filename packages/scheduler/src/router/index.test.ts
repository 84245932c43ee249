import { FairQueue, type LeasedTask, QueueAdmin } from '@requester/queue';
import { Cancellations, cancelRequest } from '@requester/shared/cancel';
import { parseDestinationSpec } from '@requester/shared/destinations';
import type { KafkaProducer } from '@requester/shared/kafka';
import { Outbox } from '@requester/shared/outbox';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { decodeQueuedTask } from '@requester/shared/task';
import {
  createTestTopics,
  eventually,
  json,
  readTopic,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Router } from './index.ts';
import { testRouter } from './router.fixture.ts';

describe('router over real Kafka, Redis and PostgreSQL', () => {
  const name = uniqueName('router');
  const topicIn = `${name}.in`;
  const topicOut = `${name}.out`;
  let redis: RedisClient;
  let queue: FairQueue;
  let pg: Awaited<ReturnType<typeof testPg>>;
  let outbox: Outbox;
  let producer: KafkaProducer;
  const routers: Router[] = [];

  function startRouter(groupId: string): Promise<void> {
    const router = testRouter({ groupId, queue, outbox, producer, topicIn, topicOut });
    routers.push(router);
    return router.start();
  }

  beforeAll(async () => {
    await createTestTopics([topicIn, topicOut], 2);
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

  const request = (requestId: string, meta: Record<string, unknown> = {}) =>
    JSON.stringify({ request: { uri: 'https://example.com/x' }, meta: { requestId, ...meta } });

  it('queues due tasks as offset-refs, parks later ones in the outbox, answers invalid ones, and ignores replays', async () => {
    await startRouter(uniqueName('first'));
    const farAhead = new Date(Date.now() + 60_000).toISOString();
    await producer.send(topicIn, [
      { key: 'a', value: request('a') },
      { key: '!k', value: request('b', { partition: '!k' }) },
      { key: 'later', value: request('later', { scheduled: farAhead }) },
      { key: 'junk', value: '{not json' },
      { key: 'bad', value: JSON.stringify({ request: { uri: 'ftp://x' }, meta: { requestId: 'bad' } }) },
      { key: 'c', value: request('c') },
    ]);

    const errors = await readTopic(topicOut, (m) => m.length >= 2);
    const bad = errors.map((m) =>
      json<{ meta: { requestId?: string; error: { code: string; message: string } } }>(m),
    );
    expect(bad.map((r) => r.meta.error.code)).toEqual(['invalid_request', 'invalid_request']);
    expect(bad.find((r) => r.meta.requestId === 'bad')?.meta.error.message).toMatch(/request\.uri/);
    expect(bad.some((r) => r.meta.requestId === undefined && /invalid JSON/.test(r.meta.error.message))).toBe(
      true,
    );

    const leased: LeasedTask[] = [];
    await eventually(
      async () => {
        leased.push(...(await queue.lease(10, 30_000)).tasks);
        return leased.length >= 3;
      },
      20_000,
      'three tasks leased',
    );
    expect(leased.map((t) => t.id).sort()).toEqual(['a:0', 'b:0', 'c:0']);
    const b = leased.find((t) => t.id === 'b:0');
    expect(b?.partition).toBe('!k');
    const ref = decodeQueuedTask(b?.payload ?? '');
    expect(ref.ref.topic).toBe(topicIn);
    expect(await outbox.count()).toBe(1);

    // A replay of `in` (a router that lost its commits) enqueues nothing twice.
    await startRouter(uniqueName('replay'));
    const replayErrors = await readTopic(topicOut, (m) => m.length >= 4);
    expect(replayErrors).toHaveLength(4); // invalid records are answered again (visible, harmless)
    expect((await queue.lease(10, 30_000)).tasks).toEqual([]);
    expect(await outbox.count()).toBe(1);
  });

  it('wakes the outbox row of a request cancelled between its look for a cancel and the write', async () => {
    const topic = `${name}.cancel-race.in`;
    await createTestTopics([topic], 1);
    const cancels = new Cancellations(redis, `${name}:c`, 60_000);
    let raced = false;
    // The cancel lands just after the router looked: its look answers "not cancelled", and the
    // canceller's wake finds no row yet (the write has not happened).
    const racing: Pick<Cancellations, 'find'> = {
      find: async (client, requestId, createdAt) => {
        if (requestId === 'raced' && !raced) {
          raced = true;
          await cancelRequest(
            { cancellations: cancels, outbox: async () => outbox },
            client,
            requestId,
            'test',
          );
          return undefined;
        }
        return cancels.find(client, requestId, createdAt);
      },
    };
    const router = testRouter({ queue, outbox, producer, topicIn: topic, topicOut, cancellations: racing });
    routers.push(router);
    await router.start();
    const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
    await producer.send(topic, [{ key: 'raced', value: request('raced', { scheduled: inAnHour }) }]);
    // Due now: the relay brings it back through the router, which queues it for its `cancelled`.
    await eventually(
      async () =>
        (await pg.sql`select 1 from outbox where request_id = 'raced' and due_at <= now()`).length === 1,
      20_000,
      'the parked row woken',
    );
    expect(raced).toBe(true);
  });

  it('judges what is due by the clock it is given (the role gives Redis’s), not this host’s', async () => {
    const topic = `${name}.clock.in`;
    await createTestTopics([topic], 1);
    // Redis's clock two minutes ahead of this host's: a request scheduled a minute from now by
    // this host is already due, and is queued rather than parked in the outbox (horizon 1 s).
    const router = testRouter({
      queue,
      outbox,
      producer,
      topicIn: topic,
      topicOut,
      redisNow: () => Date.now() + 120_000,
    });
    routers.push(router);
    await router.start();
    const inAMinute = new Date(Date.now() + 60_000).toISOString();
    await producer.send(topic, [
      { key: 'by-redis', value: request('by-redis', { scheduled: inAMinute }) },
      {
        key: 'by-redis-later',
        value: request('by-redis-later', { scheduled: new Date(Date.now() + 3_600_000).toISOString() }),
      },
    ]);
    await eventually(
      async () => (await pg.sql`select 1 from outbox where request_id = 'by-redis-later'`).length === 1,
      20_000,
      'the request due in an hour parked',
    );
    expect(await pg.sql`select 1 from outbox where request_id = 'by-redis'`).toHaveLength(0);
    // Queued: in Redis, due in a minute by Redis's real clock (this host's, in the test).
    const later = await new QueueAdmin(queue).listTasks('later', { partition: '#by-redis' }, 10);
    expect(later.tasks.map((t) => t.id)).toEqual(['by-redis:0']);
  });

  it('commits offsets only after the writes: a new router in the same group starts after them', async () => {
    const group = uniqueName('group');
    await startRouter(group);
    await producer.send(topicIn, [{ key: 'd', value: request('d') }]);
    await eventually(
      async () => (await queue.lease(10, 30_000)).tasks.some((t) => t.id === 'd:0'),
      20_000,
      'd leased',
    );
    const admin = testKafka().admin();
    await admin.connect();
    await eventually(
      async () => {
        const offsets = await admin.committedOffsets(group, topicIn);
        const committed = offsets.reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
        return committed === 7;
      },
      20_000,
      'all 7 records committed',
    );
    await admin.disconnect();
  });
});

describe('router: the default deadlines of records written straight to in', () => {
  const name = uniqueName('router-dl');
  const topicIn = `${name}.in`;
  const topicOut = `${name}.out`;
  let redis: RedisClient;
  let queue: FairQueue;
  let pg: Awaited<ReturnType<typeof testPg>>;
  let producer: KafkaProducer;
  let router: Router | undefined;

  beforeAll(async () => {
    await createTestTopics([topicIn, topicOut], 1);
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    queue = new FairQueue({ redis, prefix: `${name}:`, shards: 2, refreshMs: 0 });
    pg = await testPg();
    producer = testKafka().producer();
    await producer.connect();
  });

  afterAll(async () => {
    await router?.stop();
    await producer.disconnect();
    const keys = await redis.keys(`${name}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await pg.drop();
  });

  it('gives the destination’s or the client’s default to a record without a deadline, and leaves the others alone', async () => {
    const spec = parseDestinationSpec({ baseUrl: 'https://partner.example', deadline: '30s' });
    router = testRouter({
      queue,
      outbox: new Outbox(pg.sql),
      producer,
      topicIn,
      topicOut,
      entry: {
        signer: { verify: () => false },
        // `quotes` may be claimed, and its key gives its records 10 s.
        clients: {
          scopes: async (names) => new Map([...names].filter((n) => n === 'quotes').map((n) => [n, []])),
          deadlines: async (names) =>
            new Map([...names].filter((n) => n === 'quotes').map((n) => [n, '10s'])),
        },
        destinations: { current: async (n) => (n === 'partner' ? { name: n, version: 1, spec } : undefined) },
      },
    });
    await router.start();
    const record = (requestId: string, meta: Record<string, unknown>) => ({
      key: requestId,
      value: JSON.stringify({
        request: { uri: '/v1/x' },
        meta: { requestId, destination: 'partner', ...meta },
      }),
    });
    await producer.send(topicIn, [
      record('defaulted', {}),
      record('own', { deadline: '1h' }),
      {
        key: 'plain',
        value: JSON.stringify({ request: { uri: 'https://example.com/' }, meta: { requestId: 'plain' } }),
      },
      record('client', { client: 'quotes' }),
      {
        key: 'client-only',
        value: JSON.stringify({
          request: { uri: 'https://example.com/' },
          meta: { requestId: 'client-only', client: 'quotes' },
        }),
      },
    ]);
    const leased: LeasedTask[] = [];
    await eventually(
      async () => {
        leased.push(...(await queue.lease(10, 30_000)).tasks);
        return leased.length >= 5;
      },
      20_000,
      'five tasks leased',
    );
    // A client's task ids are in its namespace (`<id>:0 @<client>`).
    const deadlineOf = (id: string, client?: string) =>
      decodeQueuedTask(leased.find((t) => t.id === `${id}:0${client ? ` @${client}` : ''}`)?.payload ?? '')
        .deadlineAt;
    const defaulted = deadlineOf('defaulted');
    const own = deadlineOf('own');
    expect(defaulted).toBeDefined();
    expect(own).toBeDefined();
    // Counted from the record's arrival: 30 s for the default, an hour for its own.
    expect(own! - defaulted!).toBeGreaterThan(3_500_000);
    expect(defaulted! - Date.now()).toBeLessThanOrEqual(30_000);
    expect(deadlineOf('plain')).toBeUndefined();
    // The client's key's 10 s, alone or against the destination's 30 s: the earlier binds.
    const client = deadlineOf('client', 'quotes');
    expect(client! - deadlineOf('client-only', 'quotes')!).toBeLessThan(1_000);
    expect(defaulted! - client!).toBeGreaterThan(19_000);
  });
});
