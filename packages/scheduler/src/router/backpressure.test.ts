import { FairQueue } from '@requester/queue';
import { ConfigError } from '@requester/shared/errors';
import type { KafkaAdmin, KafkaProducer } from '@requester/shared/kafka';
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
import { Backpressure, backpressureRules, type OpenOriginInfo } from './backpressure.ts';
import type { RouterBackpressure } from './index.ts';
import { testRouter } from './router.fixture.ts';

const INTERVAL_MS = 50;
/** Long enough for many samples: what a paused router would have routed by then, it would have. */
const SEVERAL_SAMPLES_MS = 40 * INTERVAL_MS;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('router backpressure over real Kafka and Redis', () => {
  let redis: RedisClient;
  let producer: KafkaProducer;
  let admin: KafkaAdmin;
  let pg: Awaited<ReturnType<typeof testPg>>;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    producer = testKafka().producer();
    await producer.connect();
    admin = testKafka().admin();
    await admin.connect();
    pg = await testPg();
  });

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    await producer.disconnect();
    await admin.disconnect();
    await pg.drop();
    redis.disconnect();
  });

  /** A router on its own topics, queue and group, with the given backpressure (depth read from its queue). */
  async function startRouter(backpressure: Omit<RouterBackpressure, 'depth' | 'intervalMs'>) {
    const name = uniqueName('bp');
    const topicIn = `${name}.in`;
    const groupId = `${name}-router`;
    await createTestTopics([topicIn, `${name}.out`], 2);
    const queue = new FairQueue({ redis, prefix: `${name}:`, shards: 4, refreshMs: 0, notify: false });
    const router = testRouter({
      groupId,
      queue,
      outbox: new Outbox(pg.sql),
      producer,
      topicIn,
      topicOut: `${name}.out`,
      backpressure: { ...backpressure, intervalMs: INTERVAL_MS, depth: () => queue.pendingDepth() },
    });
    await router.start();
    cleanups.push(async () => {
      await router.stop();
      const keys = await redis.keys(`${name}:*`);
      if (keys.length > 0) await redis.del(...keys);
    });
    let sent = 0;
    const send = async (count: number) => {
      const messages = Array.from({ length: count }, () => {
        const requestId = `${name}-${sent++}`;
        return { key: requestId, value: JSON.stringify({ request: { uri: '' }, meta: { requestId } }) };
      });
      await producer.send(topicIn, messages);
    };
    /** Records of `in` the router has committed (routed and written). */
    const committed = async () => {
      const offsets = await admin.committedOffsets(groupId, topicIn);
      return offsets.reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
    };
    return { router, queue, send, committed };
  }

  it('pauses when the queue reaches the high watermark, holds new records in Kafka, resumes once drained', async () => {
    const { router, queue, send, committed } = await startRouter({
      highWatermark: 4,
      lowWatermark: 1,
      breakerPauseAfterMs: 0,
    });
    await send(4);
    await eventually(async () => (await queue.pendingDepth()) === 4, 20_000, '4 tasks queued');
    await eventually(() => router.pausedBy.includes('queue_depth'), 20_000, 'paused by depth');

    await send(3);
    await sleep(SEVERAL_SAMPLES_MS);
    expect(await queue.pendingDepth()).toBe(4); // nothing routed while paused
    expect(await committed()).toBe(4); // the 3 new records wait in Kafka (consumer lag)

    const leased = await queue.lease(10, 30_000);
    await queue.ackMany(leased.tasks.map((t) => t.token)); // the executors catch up: depth 0 ≤ low
    await eventually(async () => (await committed()) === 7, 20_000, 'held records routed after the resume');
    expect(await queue.pendingDepth()).toBe(3); // below the high watermark: consuming
    expect(router.pausedBy).toEqual([]);
  });

  it('pauses while an origin stays open longer than the limit, and resumes once none does', async () => {
    let open: OpenOriginInfo[] = [{ origin: 'https://new.example:443', openSinceMs: Date.now() }];
    const { router, queue, send, committed } = await startRouter({
      highWatermark: 0,
      lowWatermark: 0,
      breakerPauseAfterMs: 60_000,
      openOrigins: async () => open,
    });
    await send(1);
    await eventually(
      async () => (await committed()) === 1,
      20_000,
      'routed while the origin is freshly open',
    );
    expect(router.pausedBy).toEqual([]);

    open = [...open, { origin: 'https://down.example:443', openSinceMs: Date.now() - 120_000 }];
    await eventually(() => router.pausedBy.includes('breaker_open'), 20_000, 'paused by a long-open origin');
    await send(2);
    await sleep(SEVERAL_SAMPLES_MS);
    expect(await committed()).toBe(1);

    open = [];
    await eventually(async () => (await committed()) === 3, 20_000, 'routed after the breaker closed');
    expect(await queue.pendingDepth()).toBe(3);
  });
});

describe('backpressure rules', () => {
  function backpressure(depth: () => Promise<number>) {
    const calls: string[] = [];
    const bp = new Backpressure({
      highWatermark: 10,
      lowWatermark: 5,
      breakerPauseAfterMs: 0,
      intervalMs: 1_000,
      depth,
      pause: () => calls.push('pause'),
      resume: () => calls.push('resume'),
      logger: silentLogger,
    });
    return { bp, calls };
  }

  it('has hysteresis: between the watermarks the state stays as it was', async () => {
    const depths = [9, 10, 7, 5, 7];
    const { bp, calls } = backpressure(async () => depths.shift() ?? 0);
    const states: boolean[] = [];
    for (let i = 0; i < 5; i++) {
      await bp.sample();
      states.push(bp.paused);
    }
    expect(states).toEqual([false, true, true, false, false]);
    expect(calls).toEqual(['pause', 'pause', 'resume']); // pause re-applied each paused sample
  });

  it('keeps its state when a sample fails', async () => {
    let fail = false;
    const { bp } = backpressure(async () => {
      if (fail) throw new Error('redis down');
      return 10;
    });
    await bp.sample();
    fail = true;
    await bp.sample();
    expect(bp.pauseReasons).toEqual(['queue_depth']);
  });

  it('reads watermarks from config: low defaults to 80% of high, and must be below it', () => {
    const config = {
      queueHighWatermark: 1000,
      queueLowWatermark: undefined,
      routerBreakerPauseAfter: 0,
      routerBackpressureInterval: 1000,
    };
    expect(backpressureRules(config).lowWatermark).toBe(800);
    expect(() => backpressureRules({ ...config, queueLowWatermark: 1000 })).toThrow(ConfigError);
    expect(() => backpressureRules({ ...config, queueLowWatermark: 1000 })).toThrow(/QUEUE_LOW_WATERMARK/);
  });
});
