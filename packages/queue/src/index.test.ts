import { isOutage, RequesterError } from '@requester/shared/errors';
import { registry } from '@requester/shared/metrics';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import {
  eventually,
  redisServerAvailable,
  startRedisCluster,
  type TestCluster,
} from '@requester/shared/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expireCapSlots, expireLeases, leaseAll, sleep, uniquePrefix } from '../test/queue.fixture.ts';
import { QueueAdmin } from './admin.ts';
import { CAP_GRACE_MS, FairQueue, type FairQueueOptions, type LeasedTask } from './index.ts';
import { shardKey, shardOfPartition } from './keys.ts';

const haveRedisServer = redisServerAvailable();
if (!haveRedisServer) {
  console.warn('SKIPPED: the Redis Cluster suite needs /usr/bin/redis-server and /usr/bin/redis-cli');
}

interface Target {
  name: string;
  skip: boolean;
  connect(): Promise<RedisClient>;
  stop(): Promise<void>;
}

const single: Target = {
  name: 'single node',
  skip: false,
  connect: async () => createRedis({ url: 'redis://127.0.0.1:6379' }),
  stop: async () => {},
};

let cluster: TestCluster | undefined;
const clustered: Target = {
  name: '3-node cluster',
  skip: !haveRedisServer,
  connect: async () => {
    cluster = await startRedisCluster(7101);
    return createRedis({ url: cluster.url, cluster: true });
  },
  stop: async () => cluster?.stop(),
};

const ids = (tasks: LeasedTask[]) => tasks.map((t) => t.id);

describe.each([single, clustered])('FairQueue on $name', (target) => {
  let redis: RedisClient;
  const queues: FairQueue[] = [];

  beforeAll(async () => {
    if (target.skip) return;
    redis = await target.connect();
  });
  afterAll(async () => {
    if (target.skip) return;
    redis.disconnect();
    await target.stop();
  });

  /** A queue on a fresh prefix; checked for consistency and removed after the test. */
  function makeQueue(options: Partial<FairQueueOptions> = {}, prefix = uniquePrefix()): FairQueue {
    const queue = new FairQueue({ redis, prefix, shards: 8, refreshMs: 0, ...options });
    queues.push(queue);
    return queue;
  }

  afterEach(async () => {
    if (target.skip) return;
    const seen = new Set<string>();
    for (const queue of queues.splice(0)) {
      await queue.close();
      if (seen.has(queue.prefix)) continue;
      seen.add(queue.prefix);
      const admin = new QueueAdmin(queue);
      const { violations } = await admin.verify();
      await admin.destroy();
      expect(violations).toEqual([]);
    }
  });

  const test = target.skip ? it.skip : it;

  describe('publish', () => {
    test('is idempotent by task id while the task is pending, leased, dead or recently acked', async () => {
      const queue = makeQueue({ dedupWindowMs: 60_000 });
      expect(
        await queue.publish([
          { id: 'a', partition: 'p', payload: '1' },
          { id: 'a', partition: 'p', payload: '1' },
          { id: 'b', partition: 'p', payload: '2' },
        ]),
      ).toEqual(['queued', 'duplicate', 'queued']);
      expect(await queue.publish([{ id: 'a', partition: 'p', payload: '1' }])).toEqual(['duplicate']);

      const { tasks } = await queue.lease(2, 10_000);
      expect(ids(tasks).sort()).toEqual(['a', 'b']);
      expect(await queue.publish([{ id: 'a', partition: 'p', payload: '1' }])).toEqual(['duplicate']);

      const [a, b] = tasks.sort((x, y) => x.id.localeCompare(y.id)) as [LeasedTask, LeasedTask];
      expect(await queue.ack(a.token)).toBe('ok');
      expect(await queue.deadLetter(b.token, 'gave up')).toBe('ok');
      expect(
        await queue.publish([
          { id: 'a', partition: 'p', payload: '1' },
          { id: 'b', partition: 'p', payload: '2' },
        ]),
      ).toEqual(['duplicate', 'duplicate']);
    });

    test('with publishReplicas, a publish no replica confirms fails as an outage; published again, it is a duplicate', async () => {
      // These Redis servers have no replicas: WAIT confirms none.
      const queue = makeQueue({ publishReplicas: { replicas: 1, timeoutMs: 20 } });
      const err = await queue.publish([{ id: 'w', partition: 'p', payload: '' }]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RequesterError);
      expect((err as RequesterError).code).toBe('dependency_unavailable');
      expect(isOutage(err)).toBe(true);
      // The master has it: the router's second publish of the batch is refused as a duplicate.
      const plain = makeQueue({}, queue.prefix);
      expect(await plain.publish([{ id: 'w', partition: 'p', payload: '' }])).toEqual(['duplicate']);
    });

    test('accepts an acked id again once the dedup window has passed', async () => {
      const queue = makeQueue({ dedupWindowMs: 50 });
      await queue.publish([{ id: 'x', payload: '' }]);
      const [task] = (await queue.lease(1, 10_000)).tasks;
      expect(await queue.ack(task?.token ?? '')).toBe('ok');
      expect(await queue.publish([{ id: 'x', payload: '' }])).toEqual(['duplicate']);
      await sleep(80);
      expect(await queue.publish([{ id: 'x', payload: '' }])).toEqual(['queued']);
    });

    test('splits large batches per shard and keeps results in input order', async () => {
      const queue = makeQueue({ publishBatch: 3 });
      const tasks = Array.from({ length: 40 }, (_, i) => ({
        id: `t${i}`,
        partition: `p${i % 7}`,
        payload: `${i}`,
      }));
      const withDuplicates = [...tasks, tasks[5], tasks[39]].filter((t) => t !== undefined);
      const results = await queue.publish(withDuplicates);
      expect(results.slice(0, 40).every((r) => r === 'queued')).toBe(true);
      expect(results.slice(40)).toEqual(['duplicate', 'duplicate']);
      expect((await leaseAll(queue, 16)).length).toBe(40);
    });

    test('rejects malformed tasks with a clear error', async () => {
      const queue = makeQueue();
      await expect(queue.publish([{ id: '', payload: '' }])).rejects.toThrow(RequesterError);
      await expect(queue.publish([{ id: 'a', partition: 'a\0b', payload: '' }])).rejects.toThrow(/NUL/);
      await expect(queue.publish([{ id: 'a', payload: '', dueAt: -1 }])).rejects.toThrow(/dueAt/);
      await expect(queue.ack('nonsense')).rejects.toThrow(/token/);
      const small = makeQueue({ maxPayloadBytes: 10 });
      await expect(small.publish([{ id: 'big', payload: 'ü'.repeat(6) }])).rejects.toMatchObject({
        code: 'payload_too_large',
      });
    });
  });

  describe('lease', () => {
    test('round-robins over partitions: a backlog does not starve the others', async () => {
      const queue = makeQueue({ shards: 1 });
      await queue.publish(
        Array.from({ length: 10 }, (_, i) => ({ id: `hot${i}`, partition: 'hot', payload: '' })),
      );
      await queue.publish([
        { id: 'c1', partition: 'cold1', payload: '' },
        { id: 'c2', partition: 'cold2', payload: '' },
      ]);
      const order: string[] = [];
      for (let i = 0; i < 6; i++) order.push(...ids((await queue.lease(1, 10_000)).tasks));
      expect(order).toEqual(['hot0', 'c1', 'c2', 'hot1', 'hot2', 'hot3']);
    });

    test('serves the ready partitions of earlier layouts first under load (round-robin tickets, with or without a client line)', async () => {
      const queue = makeQueue({ shards: 1 });
      const key = (name: Parameters<typeof shardKey>[2]) => shardKey(queue.prefix, 0, name);
      await queue.publish([
        { id: 'old1', partition: 'a @old', payload: '' },
        { id: 'old2', partition: 'b @old', payload: '' },
      ]);
      // As an earlier version left them: `ready` scored by round-robin tickets; `a @old` also in its
      // client's line (`cready`, the layout before tags) and `b @old` in none (before fair share);
      // `clients` holding virtual times, no tag state.
      await redis.del(key('clients'), key('cready'));
      await redis.zadd(key('ready'), 1, 'a @old', 2, 'b @old');
      await redis.zadd(key('cready'), 0, 'old\u0000000000000001a @old');
      await redis.zadd(key('clients'), 0, 'old');
      // Then a busy client that always has ready partitions.
      await queue.publish(
        Array.from({ length: 20 }, (_, i) => ({ id: `busy${i}`, partition: `p${i} @busy`, payload: '' })),
      );
      // The earlier entries are first in line: served by the first lease, their line member gone.
      const first = ids((await queue.lease(4, 10_000)).tasks);
      expect(first.slice(0, 2)).toEqual(['old1', 'old2']);
      expect(await redis.zcard(key('cready'))).toBe(0);
      // A process of the earlier version still running (a rolling upgrade) readies a partition with
      // a fresh ticket from `seq`: it is served next, not after every client's work.
      await queue.publish([{ id: 'old3', partition: 'c @old', payload: '' }]);
      const ticket = Number(await redis.incr(key('seq')));
      await redis.zadd(key('ready'), ticket, 'c @old');
      await redis.zadd(key('cready'), 0, `old\u0000${ticket.toString(16).padStart(12, '0')}c @old`);
      expect(ids((await queue.lease(1, 10_000)).tasks)).toEqual(['old3']);
      expect(await redis.zcard(key('cready'))).toBe(0);
      expect((await new QueueAdmin(queue).verify()).violations).toEqual([]);
    });

    test("takes a partition out of the line an earlier version's lease adopted it into (a rolling upgrade)", async () => {
      const queue = makeQueue({ shards: 1 });
      const key = (name: Parameters<typeof shardKey>[2]) => shardKey(queue.prefix, 0, name);
      await queue.publish([
        { id: 'o0', partition: '!seq @c', payload: '' },
        { id: 'o1', partition: '!seq @c', payload: '' },
      ]);
      // A lease of the earlier version beside this one adopts a ready partition into its client's
      // line (`cready`), ticketed by its score. Left there once this version leases the partition,
      // that lease would take the line's partition again: an ordered one's next task while its
      // head is in flight.
      const tag = Number(await redis.zscore(key('ready'), '!seq @c'));
      const adopted = `c\u0000${Math.floor(tag).toString(16).padStart(12, '0')}!seq @c`;
      await redis.zadd(key('cready'), 0, adopted);
      expect(ids((await queue.lease(4, 10_000)).tasks)).toEqual(['o0']);
      expect(await redis.zscore(key('cready'), adopted)).toBeNull();
      expect((await new QueueAdmin(queue).verify()).violations).toEqual([]);
    });

    test('few backlogged partitions share one lease call equally; a lone one fills it', async () => {
      const queue = makeQueue({ shards: 16 });
      await queue.publish(
        ['a', 'b', 'c'].flatMap((p) =>
          Array.from({ length: 30 }, (_, i) => ({ id: `${p}${i}`, partition: p, payload: '' })),
        ),
      );
      const { tasks } = await queue.lease(30, 10_000);
      const perPartition = new Map<string, number>();
      for (const t of tasks) perPartition.set(t.partition, (perPartition.get(t.partition) ?? 0) + 1);
      expect(Object.fromEntries(perPartition)).toEqual({ a: 10, b: 10, c: 10 });

      await queue.ackMany(tasks.map((t) => t.token));
      const solo = makeQueue({ shards: 16 }, uniquePrefix());
      await solo.publish(
        Array.from({ length: 50 }, (_, i) => ({ id: `s${i}`, partition: 'solo', payload: '' })),
      );
      expect((await solo.lease(40, 10_000)).tasks).toHaveLength(40);
    });

    test('ordered partitions: one task in flight, strict arrival order', async () => {
      const queue = makeQueue();
      await queue.publish(
        Array.from({ length: 5 }, (_, i) => ({ id: `o${i}`, partition: '!order', payload: `${i}` })),
      );
      const seen: string[] = [];
      for (;;) {
        const { tasks } = await queue.lease(10, 10_000);
        if (tasks.length === 0) break;
        expect(tasks).toHaveLength(1);
        const [task] = tasks as [LeasedTask];
        expect(task.ordered).toBe(true);
        expect((await queue.lease(10, 10_000)).tasks).toEqual([]);
        seen.push(task.id);
        expect(await queue.ack(task.token)).toBe('ok');
      }
      expect(seen).toEqual(['o0', 'o1', 'o2', 'o3', 'o4']);
    });

    test("clients' partitions of one name (`!order-42 @a`, `!order-42 @b`, `!order-42`) are three ordered partitions", async () => {
      // One shard: their pending ranges sit side by side, and none may spill into another.
      const queue = makeQueue({ shards: 1 });
      const names = ['!order-42 @a', '!order-42 @b', '!order-42'];
      await queue.publish(
        names.flatMap((partition) =>
          [0, 1].map((i) => ({ id: `${partition}#${i}`, partition, payload: '' })),
        ),
      );
      const first = (await queue.lease(10, 10_000)).tasks;
      expect(first.map((t) => [t.partition, t.ordered])).toEqual(
        expect.arrayContaining(names.map((name) => [name, true])),
      );
      expect(first).toHaveLength(3);
      // A's head held back for 10 minutes blocks A's partition alone.
      const heldA = first.find((t) => t.partition === '!order-42 @a') as LeasedTask;
      expect(await queue.reject(heldA.token, 600_000)).toBe('ok');
      await queue.ackMany(first.filter((t) => t !== heldA).map((t) => t.token));
      const next = (await queue.lease(10, 10_000)).tasks;
      expect(ids(next).sort()).toEqual(['!order-42 @b#1', '!order-42#1']);
    });

    test('unordered partitions: several in flight, by due time then arrival', async () => {
      const queue = makeQueue();
      const now = Date.now();
      await queue.publish([
        { id: 'late', partition: 'u', payload: '', dueAt: now - 1_000 },
        { id: 'early', partition: 'u', payload: '', dueAt: now - 5_000 },
        { id: 'n1', partition: 'u', payload: '' },
        { id: 'n2', partition: 'u', payload: '' },
      ]);
      expect(ids(await leaseAll(queue, 10))).toEqual(['early', 'late', 'n1', 'n2']);
    });

    test('partitionConcurrency bounds unordered tasks in flight per partition', async () => {
      const queue = makeQueue({ partitionConcurrency: 2 });
      await queue.publish(
        Array.from({ length: 5 }, (_, i) => ({ id: `u${i}`, partition: 'u', payload: '' })),
      );
      const first = await leaseAll(queue, 10);
      expect(ids(first)).toEqual(['u0', 'u1']);
      await queue.ack(first[0]?.token ?? '');
      expect(ids(await leaseAll(queue, 10))).toEqual(['u2']);
    });

    test('a delayed task waits for its due time and nextWakeMs says how long', async () => {
      const queue = makeQueue({ maxIdleMs: 5_000 });
      // Due in 2 s: a loaded machine may stall between the publish and the lease, not that long.
      await queue.publish([{ id: 'later', partition: 'p', payload: '', delayMs: 2_000 }]);
      const idle = await queue.lease(5, 10_000);
      expect(idle.tasks).toEqual([]);
      expect(idle.nextWakeMs).toBeGreaterThan(0);
      expect(idle.nextWakeMs).toBeLessThanOrEqual(2_000);
      await sleep(idle.nextWakeMs + 20);
      expect(ids((await queue.lease(5, 10_000)).tasks)).toEqual(['later']);
    });

    test('an empty queue tells the worker to sleep up to maxIdleMs', async () => {
      const queue = makeQueue({ maxIdleMs: 700 });
      expect(await queue.lease(5, 1_000)).toEqual({ tasks: [], nextWakeMs: 700 });
    });

    test('spreads leases over shards starting at a per-worker cursor', async () => {
      const prefix = uniquePrefix();
      const publisher = makeQueue({ shards: 16 }, prefix);
      await publisher.publish(
        Array.from({ length: 200 }, (_, i) => ({ id: `t${i}`, partition: `p${i}`, payload: '' })),
      );
      const worker = makeQueue({ shards: 16 }, prefix);
      const shardsSeen = new Set<number>();
      const tasks = await leaseAll(worker, 20);
      for (const task of tasks) shardsSeen.add(worker.shardOf(task.partition));
      expect(tasks).toHaveLength(200);
      expect(shardsSeen.size).toBe(16);
    });

    test('an idle worker is woken when another process publishes (Redis pub/sub)', async () => {
      const prefix = uniquePrefix();
      const worker = makeQueue({ refreshMs: 60_000 }, prefix);
      // Announces nothing itself: the announcement below is what another process would send.
      const publisher = makeQueue({ notify: false }, prefix);
      expect((await worker.lease(1, 1_000)).tasks).toEqual([]);
      await worker.waitForWork(1); // subscribes
      const woken = worker.waitForWork(30_000);
      await publisher.publish([{ id: 'w', partition: 'p', payload: '' }]);
      await redis.publish(worker.wakeChannel, `${worker.shardOf('p')}:0`);
      expect(await woken).toBe(true);
      // the wake message also tells the worker which shard to visit, despite its stale view
      expect(ids((await worker.lease(1, 1_000)).tasks)).toEqual(['w']);
    });

    test('an idle worker is woken by a publisher of its own process without Redis pub/sub', async () => {
      const prefix = uniquePrefix();
      const worker = makeQueue({ refreshMs: 60_000 }, prefix);
      const mute = redis.duplicate();
      mute.publish = () => Promise.reject(new Error('no pub/sub here'));
      const publisher = makeQueue({ redis: mute }, prefix);
      try {
        await worker.waitForWork(1); // subscribes
        const woken = worker.waitForWork(30_000);
        await publisher.publish([{ id: 'local', partition: 'p', payload: '' }]);
        expect(await woken).toBe(true);
        expect(ids((await worker.lease(1, 1_000)).tasks)).toEqual(['local']);
      } finally {
        mute.disconnect();
      }
    });
    test('an announcement wakes the workers of its own process once: its echo through Redis is skipped', async () => {
      const prefix = uniquePrefix();
      const worker = makeQueue({ refreshMs: 60_000 }, prefix);
      const publisher = makeQueue({}, prefix);
      // Another process's view of the channel: the announcement does go out on Redis.
      const elsewhere = redis.duplicate();
      const heardElsewhere: string[] = [];
      elsewhere.on('message', (_channel: string, message: string) => heardElsewhere.push(message));
      await elsewhere.subscribe(worker.wakeChannel);
      try {
        await worker.waitForWork(1); // subscribes
        const woken = worker.waitForWork(30_000);
        await publisher.publish([{ id: 'once', partition: 'p', payload: '' }]);
        expect(await woken).toBe(true);
        expect(ids((await worker.lease(1, 1_000)).tasks)).toEqual(['once']);
        await eventually(() => heardElsewhere.length === 1, 5_000, 'the announcement on Redis');
        await sleep(50); // the worker's own subscription has had it too
        // Heard a second time (the echo), it would wake the worker for a lease that finds nothing.
        expect(await worker.waitForWork(300)).toBe(false);
      } finally {
        elsewhere.disconnect();
      }
    });
  });

  describe('lost wake-ups', () => {
    it('an announcement that came while a lease was under way ends the next wait at once', async () => {
      const prefix = uniquePrefix();
      const worker = makeQueue({ refreshMs: 60_000 }, prefix);
      const publisher = makeQueue({}, prefix);
      const listener = makeQueue({}, prefix);
      await worker.waitForWork(1); // subscribes
      await listener.waitForWork(1);
      expect((await worker.lease(1, 1_000)).tasks).toEqual([]);
      // Published after the worker's lease looked, announced before the worker waits again.
      const heard = listener.waitForWork(30_000);
      await publisher.publish([{ id: 'late', partition: 'p', payload: '' }]);
      expect(await heard).toBe(true);
      await sleep(200); // the worker's subscriber got the same message
      expect(await worker.waitForWork(2_000)).toBe(true);
      expect(ids((await worker.lease(1, 1_000)).tasks)).toEqual(['late']);
      // Seen by that lease: the next wait waits again.
      expect(await worker.waitForWork(50)).toBe(false);
    });
  });

  describe('settling leases', () => {
    test('an ack that unblocks an ordered partition wakes idle workers of other processes', async () => {
      const prefix = uniquePrefix();
      const busy = makeQueue({}, prefix);
      const idle = makeQueue({ refreshMs: 60_000 }, prefix);
      await busy.publish([
        { id: 'o1', partition: '!o', payload: '' },
        { id: 'o2', partition: '!o', payload: '' },
      ]);
      const [o1] = (await busy.lease(1, 10_000)).tasks as [LeasedTask];
      expect((await idle.lease(1, 10_000)).tasks).toEqual([]); // its view: nothing anywhere
      await idle.waitForWork(1); // subscribes
      const woken = idle.waitForWork(30_000);
      expect(await busy.ack(o1.token)).toBe('ok');
      expect(await woken).toBe(true);
      expect(ids((await idle.lease(1, 10_000)).tasks)).toEqual(['o2']);
    });

    test('reject on an ordered partition keeps the task at the head and blocks the partition', async () => {
      const queue = makeQueue();
      await queue.publish([
        { id: 'o1', partition: '!o', payload: '' },
        { id: 'o2', partition: '!o', payload: '' },
        { id: 'x', partition: 'other', payload: '' },
      ]);
      const first = await leaseAll(queue, 10);
      expect(ids(first).sort()).toEqual(['o1', 'x']);
      const o1 = first.find((t) => t.id === 'o1') as LeasedTask;
      expect(await queue.reject(o1.token, 250)).toBe('ok');
      expect(await queue.publish([{ id: 'y', partition: 'other', payload: '' }])).toEqual(['queued']);
      // the other partition runs; the ordered one stays blocked with o1 at its head
      expect(ids(await leaseAll(queue, 10))).toEqual(['y']);
      const info = await new QueueAdmin(queue).info();
      expect(info.totals.waitingPartitions).toBe(1);
      await sleep(300);
      const again = await leaseAll(queue, 10);
      expect(again.map((t) => [t.id, t.deliveries])).toEqual([['o1', 2]]);
      await queue.ack(again[0]?.token ?? '');
      expect(ids(await leaseAll(queue, 10))).toEqual(['o2']);
    });

    test('partitions: the heavy and the held-back ones, each with its head and why it waits', async () => {
      const queue = makeQueue();
      await queue.publish([
        { id: 'h1', partition: 'heavy', payload: 'p-h1' },
        { id: 'h2', partition: 'heavy', payload: 'p-h2' },
        { id: 'h3', partition: 'heavy', payload: 'p-h3' },
        { id: 'o1', partition: '!ord', payload: 'p-o1' },
        { id: 'o2', partition: '!ord', payload: 'p-o2' },
        { id: 'w1', partition: '!wait', payload: 'p-w1' },
      ]);
      // !ord: its head leased (blocked: one at a time); !wait: its head rejected for a while
      const leased = await queue.lease(10, 10_000);
      for (const task of leased.tasks.filter((t) => t.partition === 'heavy'))
        await queue.reject(task.token, 0);
      const w1 = leased.tasks.find((t) => t.id === 'w1') as LeasedTask;
      await queue.reject(w1.token, 60_000);
      const { partitions, nowMs } = await new QueueAdmin(queue).partitions(5);
      const by = new Map(partitions.map((p) => [p.partition, p]));
      expect(partitions[0]?.partition).toBe('heavy');
      expect(by.get('heavy')).toMatchObject({
        state: 'ready',
        pending: 3,
        head: { id: 'h1', payload: 'p-h1' },
      });
      expect(by.get('!ord')).toMatchObject({ state: 'blocked', pending: 1, inFlight: 1, head: { id: 'o2' } });
      const wait = by.get('!wait');
      expect(wait).toMatchObject({ state: 'waiting', pending: 1, head: { id: 'w1', deliveries: 1 } });
      expect(wait?.wakeAt).toBeGreaterThan(nowMs + 50_000);
      await queue.ack(leased.tasks.find((t) => t.id === 'o1')?.token ?? '');
      const later = await new QueueAdmin(queue).partitions(1);
      // k = 1 per set and shard: still bounded, still finds the waiting one
      expect(later.partitions.some((p) => p.partition === '!wait')).toBe(true);
    });

    test('reject on an unordered partition makes the task due later; the rest go on', async () => {
      const queue = makeQueue();
      await queue.publish([
        { id: 'u1', partition: 'u', payload: '' },
        { id: 'u2', partition: 'u', payload: '' },
      ]);
      const [u1] = (await queue.lease(1, 10_000)).tasks as [LeasedTask];
      expect(u1.id).toBe('u1');
      expect(await queue.reject(u1.token, 200)).toBe('ok');
      expect(ids(await leaseAll(queue, 10))).toEqual(['u2']);
      await sleep(250);
      const [retry] = await leaseAll(queue, 10);
      expect([retry?.id, retry?.deliveries]).toEqual(['u1', 2]);
      expect(retry?.dueAt).toBeGreaterThan(u1.dueAt);
    });

    test('reject can replace the payload (a retry carries its attempt count); empty is refused', async () => {
      const queue = makeQueue();
      await queue.publish([{ id: 'r1', partition: '!r', payload: 'try-0' }]);
      const [first] = (await queue.lease(1, 10_000)).tasks as [LeasedTask];
      await expect(queue.reject(first.token, 0, '')).rejects.toThrow(/non-empty/);
      expect(await queue.reject(first.token, 0, 'try-1')).toBe('ok');
      const [second] = await leaseAll(queue, 10);
      expect([second?.id, second?.payload]).toEqual(['r1', 'try-1']);
      expect(await queue.reject(second?.token ?? '', 0)).toBe('ok'); // no payload: kept
      const [third] = await leaseAll(queue, 10);
      expect(third?.payload).toBe('try-1');
    });

    test('deadLetter moves the task to the dlq and the ordered partition moves on', async () => {
      const queue = makeQueue();
      const admin = new QueueAdmin(queue);
      await queue.publish([
        { id: 'o1', partition: '!o', payload: 'first' },
        { id: 'o2', partition: '!o', payload: 'second' },
      ]);
      const [o1] = (await queue.lease(5, 10_000)).tasks as [LeasedTask];
      expect(await queue.deadLetter(o1.token, 'HTTP 400')).toBe('ok');
      expect(ids((await queue.lease(5, 10_000)).tasks)).toEqual(['o2']);
      const dead = await admin.listDead(10);
      expect(dead).toMatchObject([
        { id: 'o1', partition: '!o', payload: 'first', reason: 'HTTP 400', deliveries: 1 },
      ]);
      expect((await admin.info()).totals.dead).toBe(1);
    });

    test('extend keeps a lease alive past its first deadline', async () => {
      const queue = makeQueue();
      await queue.publish([{ id: 'long', partition: 'p', payload: '' }]);
      const [task] = (await queue.lease(1, 150)).tasks as [LeasedTask];
      expect(await queue.extend(task.token, 10_000)).toBe('ok');
      await sleep(250);
      expect(await queue.reclaim()).toEqual({ reclaimed: 0, deadLettered: 0 });
      expect(await queue.ack(task.token)).toBe('ok');
    });

    test('batched settle calls return one result per token, in order', async () => {
      const queue = makeQueue();
      await queue.publish(
        Array.from({ length: 30 }, (_, i) => ({ id: `t${i}`, partition: `p${i}`, payload: '' })),
      );
      const tasks = await leaseAll(queue, 30);
      const tokens = tasks.map((t) => t.token);
      expect(await queue.extendMany(tokens.map((token) => ({ token, leaseMs: 5_000 })))).toEqual(
        tokens.map(() => 'ok'),
      );
      const half = tokens.slice(0, 15);
      expect(await queue.ackMany(half)).toEqual(half.map(() => 'ok'));
      expect(await queue.ackMany(tokens)).toEqual(tokens.map((_, i) => (i < 15 ? 'stale' : 'ok')));
    });
  });

  describe('per-client cap of tasks in flight', () => {
    const clientOf = (tasks: LeasedTask[], client: string) =>
      tasks.filter((t) => t.id.endsWith(` @${client}`));
    /** Leases until `want` tasks of the client came, or the deadline (capped shards are retried every 100 ms). */
    async function leaseUntil(queue: FairQueue, client: string, want: number, leaseMs = 30_000) {
      const got: LeasedTask[] = [];
      const deadline = Date.now() + 20_000;
      while (clientOf(got, client).length < want && Date.now() < deadline) {
        got.push(...(await queue.lease(10, leaseMs)).tasks);
        if (clientOf(got, client).length < want) await sleep(20);
      }
      return got;
    }

    test('a client at its cap gets nothing more while others still lease; an ack, a reject or a lifted cap frees slots', async () => {
      const prefix = uniquePrefix();
      const one = makeQueue({}, prefix);
      const two = makeQueue({}, prefix);
      const admin = new QueueAdmin(one);
      await one.setClientMaxInFlight('capped', 2);
      // Partitions of their own: spread over the shards, so the cap must hold across them.
      await one.publish([
        ...Array.from({ length: 6 }, (_, i) => ({ id: `c${i} @capped`, payload: '' })),
        ...Array.from({ length: 4 }, (_, i) => ({ id: `f${i} @free`, payload: '' })),
      ]);
      const first = await leaseAll(one, 10);
      expect(clientOf(first, 'capped')).toHaveLength(2);
      expect(clientOf(first, 'free')).toHaveLength(4);
      // Another worker (its own view and cursor) gets none either, and the others' work still flows.
      await one.publish([{ id: 'f9 @free', payload: '' }]);
      const second = await leaseAll(two, 10);
      expect(ids(second)).toEqual(['f9 @free']);
      const capped = (await admin.clients()).find((c) => c.client === 'capped');
      expect(capped).toMatchObject({ pending: 4, maxInFlight: 2, inFlight: 2 });

      const [a, b] = clientOf(first, 'capped') as [LeasedTask, LeasedTask];
      expect(await one.ack(a.token)).toBe('ok');
      const third = await leaseUntil(two, 'capped', 1);
      expect(clientOf(third, 'capped')).toHaveLength(1);
      expect(clientOf(await leaseAll(two, 10), 'capped')).toHaveLength(0);

      expect(await one.reject(b.token, 0)).toBe('ok');
      const fourth = await leaseUntil(one, 'capped', 1);
      expect(clientOf(fourth, 'capped')).toHaveLength(1);
      expect(await one.clientInFlight('capped')).toBe(2);

      // Lifted: the rest (3 left) comes at once.
      await one.setClientMaxInFlight('capped', 0);
      expect(clientOf(await leaseAll(one, 10), 'capped')).toHaveLength(3);
      expect(await one.clientCaps()).toEqual(new Map());
    });

    test('a lease goes past shards holding only clients at their caps, and finds the work behind them', async () => {
      // Found by the model test: a lease of 1 visited two shards of a capped client, found nothing
      // it could take there, and came back empty while another shard had a task of another client.
      const prefix = uniquePrefix();
      const holder = makeQueue({}, prefix);
      const fresh = makeQueue({}, prefix);
      await holder.setClientMaxInFlight('capped', 1);
      // The capped client's tasks in every shard but the last; the free task in the last, which a
      // fresh worker's cursor reaches after all the others.
      const cappedIds: string[] = [];
      for (let i = 0; cappedIds.length < 14; i++) {
        const id = `c${i} @capped`;
        if (shardOfPartition(id, 8) !== 7) cappedIds.push(id);
      }
      let free = '';
      for (let i = 0; !free; i++) if (shardOfPartition(`f${i} @free`, 8) === 7) free = `f${i} @free`;
      await holder.publish(cappedIds.map((id) => ({ id, payload: '' })));
      const held = await leaseAll(holder, 10);
      expect(held).toHaveLength(1);
      await holder.publish([{ id: free, payload: '' }]);
      expect(ids((await fresh.lease(1, 30_000)).tasks)).toEqual([free]);
    });

    test('a client at its cap has its ready partitions set aside, out of the way, and back in line once it has a slot', async () => {
      const queue = makeQueue({ shards: 1 });
      const key = (name: Parameters<typeof shardKey>[2]) => shardKey(queue.prefix, 0, name);
      await queue.setClientMaxInFlight('capped', 1);
      await queue.publish(Array.from({ length: 5 }, (_, i) => ({ id: `c${i} @capped`, payload: '' })));
      await queue.publish(Array.from({ length: 5 }, (_, i) => ({ id: `f${i} @free`, payload: '' })));
      const first = await leaseAll(queue, 10);
      expect(clientOf(first, 'capped')).toHaveLength(1);
      expect(clientOf(first, 'free')).toHaveLength(5);
      // Asked for and denied (at its cap): its 4 partitions left the front of `ready` for its line.
      expect(await leaseAll(queue, 10)).toEqual([]);
      expect(await redis.zcard(key('cready'))).toBe(4);
      expect(Number((await redis.zrange(key('ready'), 0, 0, 'WITHSCORES'))[1])).toBeGreaterThanOrEqual(
        2 ** 48,
      );
      // Work of another client is not held behind them.
      await queue.publish([{ id: 'f9 @free', payload: '' }]);
      expect(ids((await queue.lease(10, 30_000)).tasks)).toEqual(['f9 @free']);
      // A slot again: the next of its partitions is back in line and leased.
      const [held] = clientOf(first, 'capped') as [LeasedTask];
      expect(await queue.ack(held.token)).toBe('ok');
      const next = await leaseAll(queue, 10);
      expect(clientOf(next, 'capped')).toHaveLength(1);
      expect((await new QueueAdmin(queue).verify()).violations).toEqual([]);
    });

    test('the fronts read finds a client at its cap, its partitions set aside behind any backlog', async () => {
      const queue = makeQueue({ shards: 1 });
      await queue.setClientMaxInFlight('capped', 1);
      await queue.publish(Array.from({ length: 3 }, (_, i) => ({ id: `c${i} @capped`, payload: '' })));
      expect(await leaseAll(queue, 10)).toHaveLength(1);
      expect(await leaseAll(queue, 10)).toEqual([]); // asked for, denied: the other two set aside
      // More ready partitions than the fronts' window, ahead of the set-aside band.
      await queue.publish(Array.from({ length: 1_100 }, (_, i) => ({ id: `b${i} @bulk`, payload: '' })));
      const keys = queue.keysOfShard(0);
      const oldest = async (reading: 'fronts' | 'counted') =>
        (await queue.scripts.clients(keys, reading)).clients.find((v) => v.client === 'capped')
          ?.oldestReadyPublishedAt;
      expect(await oldest('fronts')).toBeTypeOf('number');
      expect(await oldest('fronts')).toBe(await oldest('counted'));
    });

    test('a client at its cap first in line does not keep the next capped client from its turn', async () => {
      // Asked slots first (it has the next turn) and granted none: the ask passes to the client
      // behind it, in the same lease call.
      const prefix = uniquePrefix();
      const holder = makeQueue({ shards: 2 }, prefix);
      const fresh = makeQueue({ shards: 2 }, prefix);
      await holder.setClientMaxInFlight('a', 1);
      await holder.setClientMaxInFlight('b', 1);
      const inShard = (client: string, shard: number, count: number) => {
        const found: string[] = [];
        for (let i = 0; found.length < count; i++) {
          if (shardOfPartition(`${client}${i} @${client}`, 2) === shard)
            found.push(`${client}${i} @${client}`);
        }
        return found.map((id) => ({ id, payload: '' }));
      };
      const [elsewhere] = inShard('x', 0, 1).map((t) => ({ ...t, id: t.id.replace('@x', '@a') }));
      await holder.publish([elsewhere as { id: string; payload: string }]);
      expect(ids((await holder.lease(1, 30_000)).tasks)).toEqual([elsewhere?.id]);
      // In the other shard b arrives first, then a, which has the next turn there (a newcomer).
      await holder.publish(inShard('b', 1, 2));
      await holder.publish(inShard('a', 1, 2));
      expect(clientOf((await fresh.lease(1, 30_000)).tasks, 'b')).toHaveLength(1);
      expect((await fresh.lease(1, 30_000)).tasks).toEqual([]);
    });

    test('a heartbeat keeps the slots; the slots of a dead worker come back after its leases expire', async () => {
      const prefix = uniquePrefix();
      const crashed = makeQueue({}, prefix);
      const survivor = makeQueue({}, prefix);
      await survivor.setClientMaxInFlight('capped', 2);
      await crashed.publish(Array.from({ length: 5 }, (_, i) => ({ id: `c${i} @capped`, payload: '' })));
      const held = await leaseAll(crashed, 10, 300);
      expect(held).toHaveLength(2);
      // Extended past the lease it was given: still held while the heartbeat goes on.
      expect(await crashed.extendMany(held.map((t) => ({ token: t.token, leaseMs: 60_000 })))).toEqual([
        'ok',
        'ok',
      ]);
      await sleep(300 + CAP_GRACE_MS);
      expect(await leaseAll(survivor, 10)).toEqual([]);
      // The worker dies (its leases expire): the survivor gets the two back, then no more than the cap.
      await expireLeases(
        crashed,
        held.map((t) => t.token),
      );
      await expireCapSlots(
        crashed,
        held.map((t) => t.token),
      );
      const back = await leaseUntil(survivor, 'capped', 2);
      expect(back).toHaveLength(2);
      expect(await survivor.clientInFlight('capped')).toBe(2);
      expect(await leaseAll(survivor, 10)).toEqual([]);
      for (const task of held) expect(await crashed.ack(task.token)).toBe('stale');
      expect(await survivor.clientInFlight('capped')).toBe(2);
    });

    test('a dead worker’s slots expire by themselves, the lease duration plus a grace after its lease', async () => {
      const prefix = uniquePrefix();
      const crashed = makeQueue({}, prefix);
      const survivor = makeQueue({}, prefix);
      await survivor.setClientMaxInFlight('capped', 1);
      await crashed.publish(Array.from({ length: 2 }, (_, i) => ({ id: `c${i} @capped`, payload: '' })));
      const [held] = await leaseAll(crashed, 10, 200);
      expect(held).toBeDefined();
      // No test hook: the lease and then the slot expire on Redis time.
      const back = await leaseUntil(survivor, 'capped', 1);
      expect(clientOf(back, 'capped')).toHaveLength(1);
      expect(await survivor.clientInFlight('capped')).toBe(1);
    });
  });

  describe('reclaim and crashed workers', () => {
    test('a dead worker’s leases come back after expiry, in order, and its tokens are refused', async () => {
      const prefix = uniquePrefix();
      const crashed = makeQueue({}, prefix);
      const survivor = makeQueue({}, prefix);
      await crashed.publish([
        ...Array.from({ length: 4 }, (_, i) => ({ id: `o${i}`, partition: '!ordered', payload: `${i}` })),
        ...Array.from({ length: 3 }, (_, i) => ({ id: `u${i}`, partition: 'unordered', payload: `${i}` })),
      ]);
      // the worker leases and then "dies": it never acks, extends or rejects
      const held = await leaseAll(crashed, 10, 200);
      expect(ids(held).sort()).toEqual(['o0', 'u0', 'u1', 'u2']);
      // while the leases live, the ordered partition stays locked and nothing is handed out twice
      expect((await survivor.lease(10, 10_000)).tasks).toEqual([]);

      await sleep(300);
      const back = await leaseAll(survivor, 10, 10_000);
      expect(ids(back).sort()).toEqual(['o0', 'u0', 'u1', 'u2']);
      expect(back.every((t) => t.deliveries === 2)).toBe(true);
      for (const task of held) {
        expect(await crashed.ack(task.token)).toBe('stale');
        expect(await crashed.extend(task.token, 1_000)).toBe('stale');
        expect(await crashed.reject(task.token, 0)).toBe('stale');
        expect(await crashed.deadLetter(task.token, 'late')).toBe('stale');
      }
      // the ordered partition continues in arrival order with the survivor
      const order: string[] = [];
      let current = back.find((t) => t.id === 'o0');
      while (current) {
        order.push(current.id);
        expect(await survivor.ack(current.token)).toBe('ok');
        current = (await survivor.lease(10, 10_000)).tasks.find((t) => t.partition === '!ordered');
      }
      expect(order).toEqual(['o0', 'o1', 'o2', 'o3']);
    });

    test('explicit reclaim returns expired leases everywhere', async () => {
      const queue = makeQueue();
      await queue.publish(
        Array.from({ length: 20 }, (_, i) => ({ id: `t${i}`, partition: `!p${i % 4}`, payload: '' })),
      );
      const held = await leaseAll(queue, 20);
      expect(held).toHaveLength(4);
      await expireLeases(queue);
      expect(await queue.reclaim()).toEqual({ reclaimed: 4, deadLettered: 0 });
      expect(ids(await leaseAll(queue, 20)).sort()).toEqual(ids(held).sort());
    });

    test('a task whose lease keeps expiring is dead-lettered after maxDeliveries', async () => {
      const queue = makeQueue({ maxDeliveries: 2 });
      await queue.publish([
        { id: 'poison', partition: '!p', payload: '' },
        { id: 'next', partition: '!p', payload: '' },
      ]);
      for (let i = 0; i < 2; i++) {
        expect(ids((await queue.lease(1, 10_000)).tasks)).toEqual(['poison']);
        await expireLeases(queue);
      }
      expect(ids((await queue.lease(1, 10_000)).tasks)).toEqual(['next']);
      const [dead] = await new QueueAdmin(queue).listDead(5);
      expect(dead).toMatchObject({ id: 'poison', reason: 'lease expired 2 times', deliveries: 2 });
    });
  });

  describe('priority', () => {
    /** Leases one task at a time (acked at once) until `until` is leased; returns the ids in order. */
    async function leaseOneByOne(queue: FairQueue, count: number): Promise<string[]> {
      const order: string[] = [];
      for (let i = 0; i < count; i++) {
        const { tasks } = await queue.lease(1, 30_000);
        if (tasks.length === 0) break;
        order.push(...ids(tasks));
        await queue.ackMany(tasks.map((t) => t.token));
      }
      return order;
    }

    test('a high-priority task is leased before a 10,000-task low-priority backlog of its client', async () => {
      const queue = makeQueue({ shards: 1 });
      await queue.publish(
        Array.from({ length: 10_000 }, (_, i) => ({
          id: `low${i}`,
          partition: `low${i} @a`,
          payload: '',
          priority: -10,
        })),
      );
      await queue.publish([
        { id: 'mid', partition: 'mid @a', payload: '' },
        { id: 'high', partition: 'high @a', payload: '', priority: 10 },
      ]);
      const order = await leaseOneByOne(queue, 3);
      // The low partitions passed over take the served ones' places in the client's line.
      expect(order.slice(0, 2)).toEqual(['high', 'mid']);
      expect(order[2]).toMatch(/^low/);
      expect(await queue.pendingDepth()).toBe(9_999);
    });

    test('an ordered partition keeps its order whatever its tasks priorities; its head decides when it runs', async () => {
      const queue = makeQueue({ shards: 1 });
      await queue.publish([
        { id: 'x1', partition: 'x @a', payload: '' },
        { id: 'x2', partition: 'x @a', payload: '' },
        { id: 'o1', partition: '!o @a', payload: '', priority: -10 },
        { id: 'o2', partition: '!o @a', payload: '', priority: 10 },
        { id: 'o3', partition: '!o @a', payload: '', priority: 5 },
        { id: 'y1', partition: 'y @a', payload: '', priority: 3 },
      ]);
      // y (3) first, then x (0): both outrank the ordered partition's head o1 (-10), which holds
      // o2 (10) and o3 (5) back behind it.
      expect(await leaseOneByOne(queue, 10)).toEqual(['y1', 'x1', 'x2', 'o1', 'o2', 'o3']);
    });

    test('priorities never change the weighted share between clients', async () => {
      const queue = makeQueue({ shards: 1 });
      await queue.setClientWeight('heavy', 2);
      await queue.publish(
        Array.from({ length: 60 }, (_, i) => ({
          id: `t${i}`,
          partition: `p${i} @${i % 2 ? 'heavy' : 'light'}`,
          payload: '',
          // The light client asks for the top priority, the heavy one for the lowest.
          priority: i % 2 ? -10 : 10,
        })),
      );
      const order = await leaseOneByOne(queue, 30);
      const heavy = order.filter((id) => Number(id.slice(1)) % 2 === 1).length;
      expect(Math.abs(heavy - 20)).toBeLessThanOrEqual(1);
    });

    test('aging: a low-priority task is served under a constant stream of high-priority ones', async () => {
      const queue = makeQueue({ shards: 1 });
      await queue.publish([{ id: 'low', partition: 'low @a', payload: '', priority: -10 }]);
      let servedAt = -1;
      for (let round = 0; round < 20 && servedAt < 0; round++) {
        await queue.publish([
          { id: `h${round}a`, partition: `h${round}a @a`, payload: '', priority: 10 },
          { id: `h${round}b`, partition: `h${round}b @a`, payload: '', priority: 10 },
        ]);
        if ((await leaseOneByOne(queue, 1)).includes('low')) servedAt = round;
      }
      // Passed over for the high ones at first, then served (at most AGING_PASSES passes).
      expect(servedAt).toBeGreaterThan(0);
      expect(servedAt).toBeLessThanOrEqual(4);
      await leaseOneByOne(queue, 100);
    });

    test('a ready partition whose head changes ranks by its new head (an earlier-due task published)', async () => {
      const queue = makeQueue({ shards: 1 });
      const now = Date.now();
      await queue.publish([
        { id: 'u1', partition: 'u @a', payload: '', dueAt: now - 1_000 },
        { id: 'v1', partition: 'v @a', payload: '', priority: 5, dueAt: now - 1_000 },
      ]);
      // Due before u1, u0 becomes u's head while u is ready: u now ranks at 10, above v (5).
      await queue.publish([{ id: 'u0', partition: 'u @a', payload: '', priority: 10, dueAt: now - 5_000 }]);
      expect(await leaseOneByOne(queue, 3)).toEqual(['u0', 'v1', 'u1']);
    });

    test('a ready partition whose head changes ranks by its new head (a lease reclaimed)', async () => {
      const queue = makeQueue({ shards: 1 });
      const now = Date.now();
      await queue.publish([
        { id: 'u0', partition: 'u @a', payload: '', priority: 10, dueAt: now - 5_000 },
        { id: 'u1', partition: 'u @a', payload: '', dueAt: now - 1_000 },
      ]);
      const first = await queue.lease(1, 30_000);
      expect(ids(first.tasks)).toEqual(['u0']);
      // u stays ready with u1 (0) as its head; v comes at 5; then u0's lease lapses and u0 is u's head again.
      await queue.publish([{ id: 'v1', partition: 'v @a', payload: '', priority: 5, dueAt: now - 1_000 }]);
      await expireLeases(queue);
      expect(await leaseOneByOne(queue, 3)).toEqual(['u0', 'v1', 'u1']);
    });

    test('a high-priority task given back unattempted is visited first again, not when the cursor comes round', async () => {
      const queue = makeQueue();
      // Listening to announcements (a lease does), as a worker does before any publish.
      expect((await queue.lease(1, 30_000)).tasks).toEqual([]);
      // A low task ready on every shard, published unannounced (as before this worker came): the
      // cursor finds work wherever it is.
      const lows = Array.from({ length: 8 }, (_, shard) => {
        let i = 0;
        while (shardOfPartition(`low${shard}-${i} @a`, 8) !== shard) i++;
        return { id: `low${shard}`, partition: `low${shard}-${i} @a`, payload: '', priority: -10 };
      });
      await makeQueue({ notify: false }, queue.prefix).publish(lows);
      await queue.publish([{ id: 'high', partition: 'high @a', payload: '', priority: 10 }]);
      // Given back without delay, as an executor does with what a borrowing lease brings beyond its
      // room: each time, the next lease goes to its shard first (the cursor would reach it once in 8).
      for (let round = 0; round < 3; round++) {
        const { tasks } = await queue.lease(1, 30_000);
        expect(ids(tasks), `round ${round}`).toEqual(['high']);
        await queue.reject((tasks[0] as LeasedTask).token, 0);
      }
    });

    test('a leased task carries its priority (none when 0)', async () => {
      const queue = makeQueue({ shards: 1 });
      await queue.publish([
        { id: 'p5', payload: '', priority: 5 },
        { id: 'p0', payload: '' },
      ]);
      const { tasks } = await queue.lease(2, 30_000);
      expect(Object.fromEntries(tasks.map((t) => [t.id, t.priority]))).toEqual({ p5: 5, p0: undefined });
      await queue.ackMany(tasks.map((t) => t.token));
    });

    test('refuses a priority out of range or not an integer', async () => {
      const queue = makeQueue();
      await expect(queue.publish([{ id: 'a', payload: '', priority: 11 }])).rejects.toThrow(/priority/);
      await expect(queue.publish([{ id: 'a', payload: '', priority: -11 }])).rejects.toThrow(/priority/);
      await expect(queue.publish([{ id: 'a', payload: '', priority: 1.5 }])).rejects.toThrow(/priority/);
    });
  });

  describe('pendingDepth', () => {
    test('counts the tasks waiting to be leased on every shard, due or not, and sets the gauge', async () => {
      const queue = makeQueue({ shards: 4 });
      expect(await queue.pendingDepth()).toBe(0);
      await queue.publish([
        ...Array.from({ length: 5 }, (_, i) => ({ id: `t${i}`, partition: `p${i}`, payload: '' })),
        { id: 'later', partition: 'delayed', payload: '', delayMs: 60_000 },
      ]);
      expect(await queue.pendingDepth()).toBe(6);
      const leased = await queue.lease(2, 30_000);
      expect(leased.tasks).toHaveLength(2);
      expect(await queue.pendingDepth()).toBe(4); // leased tasks are in flight, not pending
      const gauge = await registry.getSingleMetric('requester_queue_depth')?.get();
      expect(gauge?.values).toContainEqual({ labels: { queue: queue.name, state: 'pending' }, value: 4 });
    });
  });

  describe('client wait', () => {
    test('each leased task’s wait from its due time is observed per client; no client is `(none)`', async () => {
      const queue = makeQueue({ shards: 4 });
      // Due 30 s ago (the caller's clock), so that its observed wait is at least that.
      const dueAt = Date.now() - 30_000;
      await queue.publish([
        { id: 'a1 @alpha', payload: '', dueAt },
        { id: 'a2 @alpha', payload: '', dueAt },
        { id: 'b1 @beta', payload: '' },
        { id: 'anon', payload: '' },
      ]);
      expect(await leaseAll(queue, 10)).toHaveLength(4);
      const histogram = await registry.getSingleMetric('requester_queue_client_wait_seconds')?.get();
      // A histogram's values carry the series name (`…_count`, `…_sum`, `…_bucket`) beside the labels.
      const mine = (
        (histogram?.values ?? []) as { metricName?: string; labels: Record<string, unknown>; value: number }[]
      ).filter((v) => v.labels.queue === queue.name);
      const series = (suffix: string, client: string) =>
        mine.find((v) => v.metricName?.endsWith(suffix) && v.labels.client === client)?.value;
      const count = (client: string) => series('_count', client);
      const sum = (client: string) => series('_sum', client) ?? 0;
      expect([count('alpha'), count('beta'), count('(none)')]).toEqual([2, 1, 1]);
      expect(sum('alpha')).toBeGreaterThanOrEqual(60);
      expect(sum('beta')).toBeLessThan(30);
    });
  });

  describe('admin', () => {
    test('clients: backlog, ready partitions, weight and the next task’s wait per client, largest first; gauges with `other`', async () => {
      const queue = makeQueue({ shards: 4 });
      const admin = new QueueAdmin(queue);
      await queue.setClientWeight('big', 3);
      await queue.publish([
        ...Array.from({ length: 5 }, (_, i) => ({ id: `b${i} @big`, payload: '' })),
        { id: 'o1', partition: '!o @small', payload: '' },
        { id: 'o2', partition: '!o @small', payload: '' },
        { id: 'later @small', payload: '', delayMs: 60_000 },
        { id: 'anon', payload: '' },
      ]);
      const clients = await admin.clients();
      expect(clients.map(({ oldestReadyAgeMs: _, ...c }) => c)).toEqual([
        { client: 'big', pending: 5, readyPartitions: 5, weight: 3, maxInFlight: null, inFlight: null },
        { client: 'small', pending: 3, readyPartitions: 1, weight: 1, maxInFlight: null, inFlight: null },
        { client: '', pending: 1, readyPartitions: 1, weight: 1, maxInFlight: null, inFlight: null },
      ]);
      expect(clients.every((c) => c.oldestReadyAgeMs !== null && c.oldestReadyAgeMs >= 0)).toBe(true);
      const gauge = (await registry.getSingleMetric('requester_queue_client_depth')?.get())?.values ?? [];
      const mine = gauge.filter((v) => v.labels.queue === queue.name);
      expect(Object.fromEntries(mine.map((v) => [v.labels.client, v.value]))).toEqual({
        big: 5,
        small: 3,
        '(none)': 1,
        other: 0,
      });
      // Leased tasks leave the backlog; a client with none left is no longer listed.
      await leaseAll(queue, 20);
      expect((await admin.clients()).map((c) => [c.client, c.pending])).toEqual([['small', 2]]);
    });

    test('the sampler reads fronts only: every client’s next task as a full read finds it, behind any backlog and weights', async () => {
      const queue = makeQueue({ shards: 1 });
      const admin = new QueueAdmin(queue);
      await queue.setClientWeight('heavy', 1000);
      await queue.setClientWeight('mid', 4);
      const publish = (client: string, n: number, from: number) =>
        queue.publish(
          Array.from({ length: n }, (_, i) => ({ id: `${client}${from + i} @${client}`, payload: '' })),
        );
      // A backlog far beyond the fronts' window (~1,000 + Σ(weight + 1)), then others joining as
      // turns go by: each client's front is somewhere in `ready` by its tag, not at a line's head.
      await publish('heavy', 3_000, 0);
      await publish('light', 500, 0);
      const leaseSome = async (n: number) => {
        for (let left = n; left > 0; ) left -= (await queue.lease(Math.min(left, 100), 30_000)).tasks.length;
      };
      await leaseSome(700);
      await publish('mid', 300, 0);
      await sleep(20);
      await publish('late', 2, 0);
      await leaseSome(400);
      await publish('heavy', 100, 3_000);
      const keys = queue.keysOfShard(0);
      const fronts = await queue.scripts.clients(keys, 'fronts');
      const counted = await queue.scripts.clients(keys, 'counted');
      const oldest = (views: typeof fronts.clients) =>
        Object.fromEntries(views.map((v) => [v.client, [v.pending, v.oldestReadyPublishedAt]]));
      expect(counted.clients.map((v) => v.client).sort()).toEqual(['heavy', 'late', 'light', 'mid']);
      expect(counted.clients.every((v) => v.oldestReadyPublishedAt !== null)).toBe(true);
      expect(oldest(fronts.clients)).toEqual(oldest(counted.clients));
      expect(fronts.clients.every((v) => v.readyPartitions === null)).toBe(true);
      expect(counted.clients.reduce((n, v) => n + (v.readyPartitions ?? 0), 0)).toBe(
        (await admin.info()).totals.readyPartitions,
      );
      // A view refreshed every few seconds asks for the fronts too: the same clients, uncounted.
      const uncounted = await admin.clients({ readyPartitions: false });
      expect(uncounted.map((c) => [c.client, c.pending, c.readyPartitions])).toEqual(
        (await admin.clients()).map((c) => [c.client, c.pending, null]),
      );
      // What the routers sample: the gauges, from the fronts.
      await admin.sampleClients();
      const gauge = (await registry.getSingleMetric('requester_queue_client_depth')?.get())?.values ?? [];
      const depths = Object.fromEntries(
        gauge.filter((v) => v.labels.queue === queue.name).map((v) => [v.labels.client, v.value]),
      );
      expect(depths).toEqual(
        Object.fromEntries([...counted.clients.map((v) => [v.client, v.pending]), ['other', 0]]),
      );
    });

    test('info reports depth, partitions by state, in-flight, dead letters and oldest age', async () => {
      const queue = makeQueue({ shards: 4 });
      const admin = new QueueAdmin(queue);
      await queue.publish([
        { id: 'o1', partition: '!o', payload: '' },
        { id: 'o2', partition: '!o', payload: '' },
        { id: 'later', partition: 'delayed', payload: '', delayMs: 60_000 },
        { id: 'r1', partition: 'r', payload: '' },
        { id: 'd1', partition: 'd', payload: '' },
      ]);
      expect((await admin.info()).totals).toMatchObject({
        pending: 5,
        readyPartitions: 3,
        waitingPartitions: 1,
      });
      await sleep(1_100);
      const leased = await leaseAll(queue, 10);
      expect(ids(leased).sort()).toEqual(['d1', 'o1', 'r1']);
      await queue.deadLetter(leased.find((t) => t.id === 'd1')?.token ?? '', 'no');
      const progress: Array<[number, number]> = [];
      const info = await admin.info({ onProgress: (done, total) => progress.push([done, total]) });
      expect(info.totals).toEqual({
        pending: 2,
        inFlight: 2,
        dead: 1,
        readyPartitions: 0,
        waitingPartitions: 1,
        blockedPartitions: 1,
        dedupIds: 0,
      });
      expect(info.shards).toHaveLength(4);
      expect(info.oldestTaskAgeMs).toBeGreaterThanOrEqual(1_000);
      expect(progress.at(-1)).toEqual([4, 4]);
    });

    test('retryDead brings dead letters back; purge removes dead letters or everything', async () => {
      const queue = makeQueue();
      const admin = new QueueAdmin(queue);
      await queue.publish(
        Array.from({ length: 6 }, (_, i) => ({ id: `t${i}`, partition: `p${i}`, payload: `${i}` })),
      );
      const leased = await leaseAll(queue, 10);
      await queue.deadLetterMany(leased.map((t) => ({ token: t.token, reason: 'boom' })));
      expect((await admin.listDead(100)).length).toBe(6);

      expect(await admin.retryDead(['t0', 't1', 'missing'])).toEqual({ retried: 2 });
      const retried = await leaseAll(queue, 10);
      expect(retried.map((t) => [t.id, t.deliveries]).sort()).toEqual([
        ['t0', 1],
        ['t1', 1],
      ]);
      await queue.deadLetterMany(retried.map((t) => ({ token: t.token, reason: 'again' })));
      expect(await admin.retryDead('all')).toEqual({ retried: 6 });
      const all = await leaseAll(queue, 10);
      await queue.deadLetterMany(all.map((t) => ({ token: t.token, reason: 'final' })));

      expect(await admin.purge({ deadOnly: true })).toEqual({ removed: 6 });
      expect((await admin.info()).totals.dead).toBe(0);
      // purged dead letters stay refused inside the dedup window
      expect(await queue.publish([{ id: 't0', partition: 'p0', payload: '' }])).toEqual(['duplicate']);

      await queue.publish([{ id: 'n', partition: 'p', payload: '' }]);
      const steps: number[] = [];
      expect(await admin.purge({ onProgress: (done) => steps.push(done) })).toEqual({ removed: 1 });
      expect(steps).toHaveLength(queue.shards);
      expect((await admin.info()).totals).toMatchObject({ pending: 0, dedupIds: 0 });
      // purge keeps the sequence counters (tokens never repeat); destroy removes them too
      const seqKeys = () =>
        Promise.all(
          Array.from({ length: queue.shards }, (_, s) => queue.redis.exists(`${queue.prefix}{q:${s}}:seq`)),
        ).then((found) => found.reduce((a, b) => a + b, 0));
      expect(await seqKeys()).toBeGreaterThan(0);
      await admin.destroy();
      expect(await seqKeys()).toBe(0);
    });
  });
});
