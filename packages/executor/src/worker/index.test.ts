import { FairQueue, QueueAdmin, queueFromConfig } from '@requester/scheduler';
import {
  type Consumer,
  createConsumer,
  createFetcher,
  createProducer,
  createRedis,
  Dependencies,
  encodeQueuedTask,
  loadConfig,
  type Producer,
  produce,
  queuePartition,
  type RedisClient,
  type RequestEnvelopeInput,
  type ResultEnvelope,
  taskId,
} from '@requester/shared';
import {
  createTestTopics,
  silentLogger,
  startTarget,
  type Target,
  TEST_KAFKA_BROKERS,
  testKafka,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpClient } from '../http/index.ts';
import { idempotencyKey } from '../http/request.ts';
import { executorRole } from '../index.ts';
import type { Classifier } from './classify.ts';
import { Executor } from './index.ts';

/**
 * The executor end to end over the real Kafka and Redis and a real HTTP target: envelopes are
 * written to a test `in` topic, offset-refs published into a FairQueue (test prefix), and results
 * read back from a test `out` topic by one collector shared by every test.
 */
describe('executor (end to end)', () => {
  const inTopic = uniqueName('ex-in');
  const outTopic = uniqueName('ex-out');
  const results = new Map<string, ResultEnvelope[]>();
  const waiters = new Set<() => void>();
  let collector: Consumer;
  let producer: Producer;
  let redis: RedisClient;
  let target: Target;
  const cleanups: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    await createTestTopics([inTopic, outTopic], 3);
    producer = createProducer(testKafka());
    await producer.connect();
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    target = await startTarget();
    collector = createConsumer(testKafka(), { groupId: uniqueName('ex-collector') });
    await collector.connect();
    await collector.subscribe({ topic: outTopic, fromBeginning: true });
    await collector.run({
      eachMessage: async ({ message }) => {
        const key = message.key?.toString() ?? '';
        results.set(key, [...(results.get(key) ?? []), JSON.parse(message.value?.toString() ?? 'null')]);
        for (const wake of [...waiters]) wake();
      },
    });
  }, 60_000);

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    await collector.disconnect();
    await producer.disconnect();
    await target.close();
    redis.disconnect();
  }, 60_000);

  /** Resolves with the first result of `requestId` on out (bounded by the test timeout). */
  async function resultOf(requestId: string): Promise<ResultEnvelope> {
    for (;;) {
      const found = results.get(requestId)?.[0];
      if (found) return found;
      await new Promise<void>((resolve) => {
        const wake = () => {
          waiters.delete(wake);
          resolve();
        };
        waiters.add(wake);
      });
    }
  }

  function newQueue(): FairQueue {
    const queue = new FairQueue({ redis, prefix: `${uniqueName('ex')}:`, shards: 8, logger: silentLogger });
    cleanups.push(async () => {
      await new QueueAdmin(queue).purge();
      await queue.close();
    });
    return queue;
  }

  /**
   * Writes raw `in` values to one Kafka partition (so offsets follow from the base offset) and
   * publishes their offset-refs to the queue, as the router does.
   */
  async function submitRaw(
    queue: FairQueue,
    items: Array<{ requestId: string; partition?: string; value: string }>,
    offsetShift = 0,
  ): Promise<void> {
    const kafkaPartition = Math.floor(Math.random() * 3);
    const [meta] = await produce(
      producer,
      inTopic,
      items.map((item) => ({ partition: kafkaPartition, key: item.requestId, value: item.value })),
    );
    const base = BigInt(meta?.baseOffset ?? '0');
    await queue.publish(
      items.map((item, i) => ({
        id: taskId(item.requestId, 0),
        partition: queuePartition(item.partition, item.requestId),
        payload: encodeQueuedTask({
          ref: { topic: inTopic, partition: kafkaPartition, offset: String(base + BigInt(i + offsetShift)) },
          requestId: item.requestId,
          tryCount: 0,
        }),
      })),
    );
  }

  function submit(queue: FairQueue, envelopes: RequestEnvelopeInput[]): Promise<void> {
    return submitRaw(
      queue,
      envelopes.map((e) => ({
        requestId: e.meta.requestId,
        ...(e.meta.partition === undefined ? {} : { partition: e.meta.partition }),
        value: JSON.stringify(e),
      })),
    );
  }

  function startExecutor(
    options: {
      allow?: string[];
      maxWorkers?: number;
      classify?: Classifier;
      leaseTtlMs?: number;
      queue?: FairQueue;
    } = {},
  ) {
    const queue = options.queue ?? newQueue();
    const fetcher = createFetcher({ brokers: TEST_KAFKA_BROKERS, clientId: 'ex-test', logger: silentLogger });
    const http = createHttpClient({
      connectTimeoutMs: 2_000,
      responseTimeoutMs: 10_000,
      maxResponseBytes: 1 << 20,
      followRedirects: false,
      allowPrivateTargets: options.allow ?? ['127.0.0.1'],
    });
    const executor = new Executor({
      queue,
      fetcher,
      http,
      producer,
      topicOut: outTopic,
      maxWorkers: options.maxWorkers ?? 8,
      leaseTtlMs: options.leaseTtlMs ?? 10_000,
      produceTimeoutMs: 10_000,
      logger: silentLogger,
      ...(options.classify ? { classify: options.classify } : {}),
    });
    executor.start();
    let stopped = false;
    const stop = async () => {
      if (stopped) return;
      stopped = true;
      await executor.drain();
      http.close();
      await fetcher.close();
    };
    cleanups.push(stop);
    return { queue, executor, stop };
  }

  describe('through the executor role', () => {
    let queue: FairQueue;
    let handle: Awaited<ReturnType<typeof executorRole.start>>;
    let deps: Dependencies;

    beforeAll(async () => {
      const config = loadConfig({
        KAFKA_BROKERS: TEST_KAFKA_BROKERS,
        KAFKA_TOPIC_IN: inTopic,
        KAFKA_TOPIC_OUT: outTopic,
        KAFKA_CREATE_TOPICS: 'false',
        REDIS_PREFIX: uniqueName('ex'),
        QUEUE_SHARDS: '8',
        MAX_WORKERS: '8',
        ALLOW_PRIVATE_TARGETS: '127.0.0.1',
        TARGET_RESPONSE_TIMEOUT: '500ms',
        LOG_LEVEL: 'silent',
      });
      deps = new Dependencies(config, silentLogger);
      handle = await executorRole.start({ config, logger: silentLogger, deps });
      queue = queueFromConfig(config, redis); // the role's queue, seen from the router's side
      cleanups.push(async () => {
        await handle.drain();
        await deps.close();
        await new QueueAdmin(queue).purge();
        await queue.close();
      });
    });

    it('delivers the target answer: status, body, headers, echoed proxyData, meta', async () => {
      const requestId = uniqueName('ok');
      const proxyData = { service: 'billing', nested: { n: [1, 2] } };
      await submit(queue, [
        {
          request: {
            uri: `${target.url}/echo?id=${requestId}`,
            method: 'POST',
            body: '{"id":42}',
            headers: { 'content-type': 'application/json', 'x-caller': 'test' },
          },
          meta: { requestId, proxyData },
        },
      ]);
      const result = await resultOf(requestId);
      expect(result.response).toMatchObject({ status: 200, body: '{"id":42}' });
      expect(result.response.headers['x-target']).toBe('test');
      expect(result.meta).toMatchObject({ requestId, tryCount: 1, cached: false, waitTime: 0, proxyData });
      expect(result.meta.error).toBeUndefined();
      expect(Number.isInteger(result.meta.time) && result.meta.time > 0).toBe(true);

      const call = target.calls.find((c) => c.path.includes(requestId));
      expect(call?.method).toBe('POST');
      expect(call?.headers['x-caller']).toBe('test');
      expect(call?.headers['idempotency-key']).toBe(idempotencyKey(requestId));
    });

    it('keeps an Idempotency-Key the caller set', async () => {
      const requestId = uniqueName('idem');
      await submit(queue, [
        {
          request: { uri: `${target.url}/echo?id=${requestId}`, headers: { 'Idempotency-Key': 'mine' } },
          meta: { requestId },
        },
      ]);
      expect((await resultOf(requestId)).response.status).toBe(200);
      expect(target.calls.find((c) => c.path.includes(requestId))?.headers['idempotency-key']).toBe('mine');
    });

    it('answers a wake-up with a synthetic 200 carrying its body and headers, calling nobody', async () => {
      const requestId = uniqueName('wake');
      await submit(queue, [
        {
          request: { uri: '', body: 'ring', headers: { 'x-alarm': 'on' } },
          meta: { requestId, proxyData: { alarm: true } },
        },
      ]);
      const result = await resultOf(requestId);
      expect(result.response).toEqual({ status: 200, body: 'ring', headers: { 'x-alarm': 'on' } });
      expect(result.meta).toMatchObject({ requestId, tryCount: 1, proxyData: { alarm: true } });
      expect(target.calls.some((c) => c.path.includes(requestId))).toBe(false);
    });

    it('answers a refused connection with 502 and meta.error', async () => {
      const requestId = uniqueName('refused');
      const gone = await startTarget();
      await gone.close();
      await submit(queue, [{ request: { uri: `${gone.url}/echo` }, meta: { requestId, proxyData: 'p' } }]);
      const result = await resultOf(requestId);
      expect(result.response.status).toBe(502);
      expect(result.meta.error?.code).toBe('transport_error');
      expect(result.meta.error?.message).toMatch(/ECONNREFUSED/);
      expect(result.meta).toMatchObject({ tryCount: 1, proxyData: 'p' });
    });

    it('answers a target slower than the response timeout with 504 and meta.error', async () => {
      const requestId = uniqueName('slow');
      await submit(queue, [
        { request: { uri: `${target.url}/slow/5000?id=${requestId}` }, meta: { requestId } },
      ]);
      const result = await resultOf(requestId);
      expect(result.response.status).toBe(504);
      expect(result.meta.error).toEqual({ code: 'timeout', message: 'target did not answer within 500 ms' });
    });

    it('answers invalid records with 400 invalid_request, keyed by the requestId', async () => {
      const notJson = uniqueName('not-json');
      const badSchema = uniqueName('bad-schema');
      await submitRaw(queue, [
        { requestId: notJson, value: '{not json' },
        {
          requestId: badSchema,
          value: JSON.stringify({ request: { uri: 'ftp://x' }, meta: { requestId: badSchema } }),
        },
      ]);
      const [a, b] = await Promise.all([resultOf(notJson), resultOf(badSchema)]);
      expect(a.response.status).toBe(400);
      expect(a.meta.error?.code).toBe('invalid_request');
      expect(b.response.status).toBe(400);
      expect(b.meta.error?.issues?.[0]?.path).toBe('request.uri');
    });

    it('answers a task whose in-record is gone with an error result, never silence', async () => {
      const missing = uniqueName('missing');
      await submitRaw(queue, [{ requestId: missing, value: '{}' }], 1_000); // ref far past the end
      const result = await resultOf(missing);
      expect(result.response.status).toBe(500);
      expect(result.meta.error?.code).toBe('not_found');

      const expired = uniqueName('expired');
      const topic = uniqueName('ex-expired');
      await createTestTopics([topic], 1);
      await produce(producer, topic, [{ value: 'old' }, { value: 'new' }]);
      const admin = testKafka().admin();
      await admin.connect();
      await admin.fetchTopicMetadata({ topics: [topic] });
      await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '1' }] }); // as retention would
      await admin.disconnect();
      await queue.publish([
        {
          id: taskId(expired, 0),
          payload: encodeQueuedTask({
            ref: { topic, partition: 0, offset: '0' },
            requestId: expired,
            tryCount: 0,
          }),
        },
      ]);
      const gone = await resultOf(expired);
      expect(gone.response.status).toBe(500);
      expect(gone.meta.error?.code).toBe('record_expired');
    });
  });

  it('refuses a private target when not allowed: 502 target_refused, and the target never sees it', async () => {
    const { queue } = startExecutor({ allow: [] });
    const requestId = uniqueName('ssrf');
    await submit(queue, [{ request: { uri: `${target.url}/echo?id=${requestId}` }, meta: { requestId } }]);
    const result = await resultOf(requestId);
    expect(result.response.status).toBe(502);
    expect(result.meta.error?.code).toBe('target_refused');
    expect(target.calls.some((c) => c.path.includes(requestId))).toBe(false);
  });

  it('keeps an ordered partition in order with 8 workers and random target delays', async () => {
    const { queue } = startExecutor({ maxWorkers: 8 });
    const run = uniqueName('ord');
    const ordered = Array.from({ length: 50 }, (_, i) => ({
      request: { uri: `${target.url}/random-delay/30?run=${run}&seq=${i}` },
      meta: { requestId: `${run}-${i}`, partition: `!${run}` },
    }));
    // Unordered neighbours keep the other workers busy meanwhile.
    const loose = Array.from({ length: 30 }, (_, i) => ({
      request: { uri: `${target.url}/random-delay/30?run=${run}-loose&seq=${i}` },
      meta: { requestId: `${run}-loose-${i}` },
    }));
    await submit(queue, [...ordered, ...loose]);
    await Promise.all([...ordered, ...loose].map((e) => resultOf(e.meta.requestId)));

    const seen = target.calls
      .filter((c) => c.path.includes(`run=${run}&`))
      .map((c) => Number(new URL(c.path, 'http://x').searchParams.get('seq')));
    expect(seen).toEqual(ordered.map((_, i) => i));
    for (const e of ordered) expect(results.get(e.meta.requestId)).toHaveLength(1);
  });

  it('carries out a retry decision: same Idempotency-Key on both attempts, tryCount 2', async () => {
    const retryFirst: Classifier = ({ tryCount }) =>
      tryCount === 1 ? { action: 'retry', delayMs: 0, reason: 'test' } : { action: 'deliver' };
    const { queue } = startExecutor({ classify: retryFirst });
    const requestId = uniqueName('retry');
    await submit(queue, [{ request: { uri: `${target.url}/echo?id=${requestId}` }, meta: { requestId } }]);
    const result = await resultOf(requestId);
    expect(result.meta.tryCount).toBe(2);
    const calls = target.calls.filter((c) => c.path.includes(requestId));
    expect(calls).toHaveLength(2);
    expect(new Set(calls.map((c) => c.headers['idempotency-key']))).toEqual(
      new Set([idempotencyKey(requestId)]),
    );
  });

  it('keeps the lease of a call longer than the lease TTL (heartbeats): one call, one result', async () => {
    const first = startExecutor({ leaseTtlMs: 300 });
    startExecutor({ leaseTtlMs: 300, queue: first.queue }); // would reclaim a lapsed lease and call again
    const requestId = uniqueName('long');
    await submit(first.queue, [
      { request: { uri: `${target.url}/slow/1500?id=${requestId}` }, meta: { requestId } },
    ]);
    expect((await resultOf(requestId)).response.status).toBe(200);
    await first.stop();
    expect(target.calls.filter((c) => c.path.includes(requestId))).toHaveLength(1);
    expect(results.get(requestId)).toHaveLength(1);
  });

  it('drains: the calls in hand end on out and are acked; the rest wait in the queue for the next executor', async () => {
    const first = startExecutor({ maxWorkers: 4 });
    const run = uniqueName('drain');
    const envelopes = Array.from({ length: 12 }, (_, i) => ({
      request: { uri: `${target.url}/slow/300?run=${run}&seq=${i}` },
      meta: { requestId: `${run}-${i}` },
    }));
    await submit(first.queue, envelopes);
    const called = () => target.calls.filter((c) => c.path.includes(run));
    while (called().length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    await first.stop();

    const calledBeforeDrain = called().map((c) => new URL(c.path, 'http://x').searchParams.get('seq'));
    expect(calledBeforeDrain.length).toBeGreaterThan(0);
    expect(calledBeforeDrain.length).toBeLessThan(envelopes.length);
    await Promise.all(calledBeforeDrain.map((seq) => resultOf(`${run}-${seq}`)));
    const info = await new QueueAdmin(first.queue).info();
    expect(info.totals.inFlight).toBe(0);
    expect(info.totals.pending).toBe(envelopes.length - calledBeforeDrain.length);

    // A second executor on the same queue finishes the rest: nothing lost, nothing run twice.
    const second = new Executor({
      queue: first.queue,
      fetcher: createFetcher({ brokers: TEST_KAFKA_BROKERS, clientId: 'ex-test-2', logger: silentLogger }),
      http: createHttpClient({
        connectTimeoutMs: 2_000,
        responseTimeoutMs: 10_000,
        maxResponseBytes: 1 << 20,
        followRedirects: false,
        allowPrivateTargets: ['127.0.0.1'],
      }),
      producer,
      topicOut: outTopic,
      maxWorkers: 4,
      leaseTtlMs: 10_000,
      produceTimeoutMs: 10_000,
      logger: silentLogger,
    });
    second.start();
    cleanups.push(() => second.drain());
    await Promise.all(envelopes.map((e) => resultOf(e.meta.requestId)));
    expect(called()).toHaveLength(envelopes.length);
    for (const e of envelopes) expect(results.get(e.meta.requestId)).toHaveLength(1);
  });
});
