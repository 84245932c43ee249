import { OriginPacer } from '@requester/policies';
import { FairQueue, QueueAdmin } from '@requester/queue';
import type { RequestEnvelopeInput, ResultEnvelope } from '@requester/shared/contract';
import type { KafkaConsumer, KafkaProducer } from '@requester/shared/kafka';
import { createRedis, type Redis, type RedisClient } from '@requester/shared/redis';
import {
  decodeQueuedTask,
  encodeQueuedTask,
  type InlineRecord,
  queuePartition,
  taskId,
} from '@requester/shared/task';
import {
  consumeEach,
  createTestTopics,
  silentLogger,
  startTarget,
  type Target,
  testKafka,
  uniqueName,
} from '@requester/shared/testing';
import { createHttpClient } from '../http/index.ts';
import { Executor, type ExecutorOptions } from './index.ts';

/**
 * Test support for executor tests over the real Kafka and Redis and a real HTTP target (not a
 * test file itself): envelopes are written to a test `in` topic, offset-refs published into a
 * FairQueue (test prefix) as the router does, and `out` and the DLQ are read back by one collector
 * per topic. Call `open()` in beforeAll and `close()` in afterAll.
 */
export class ExecutorHarness {
  readonly inTopic = uniqueName('ex-in');
  readonly outTopic = uniqueName('ex-out');
  readonly dlqTopic = uniqueName('ex-dlq');
  /** Every record of `out` / the DLQ by key (all copies kept: duplicates are visible). */
  readonly results = new Map<string, ResultEnvelope[]>();
  readonly deadLetters = new Map<string, Array<{ value: string; headers: Record<string, string> }>>();
  producer!: KafkaProducer;
  redis!: RedisClient;
  target!: Target;
  private readonly waiters = new Set<() => void>();
  private readonly collectors: KafkaConsumer[] = [];
  private readonly cleanups: Array<() => Promise<void>> = [];

  async open(): Promise<void> {
    await createTestTopics([this.inTopic, this.outTopic, this.dlqTopic], 3);
    this.producer = testKafka().producer();
    await this.producer.connect();
    this.redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    this.target = await startTarget();
    await this.collect(this.outTopic, (key, value) => {
      this.results.set(key, [...(this.results.get(key) ?? []), JSON.parse(value) as ResultEnvelope]);
    });
    await this.collect(this.dlqTopic, (key, value, headers) => {
      this.deadLetters.set(key, [...(this.deadLetters.get(key) ?? []), { value, headers }]);
    });
  }

  async close(): Promise<void> {
    for (const cleanup of this.cleanups.reverse()) await cleanup();
    for (const collector of this.collectors) await collector.stop();
    await this.producer.disconnect();
    await this.target.close();
    this.redis.disconnect();
  }

  /** Runs at close, before the clients close (last registered, first run). */
  onClose(cleanup: () => Promise<void>): void {
    this.cleanups.push(cleanup);
  }

  /**
   * Resolves with what `check()` finds, re-checked at every record collected and every 20 ms (for
   * facts outside Kafka, e.g. calls at the target); bounded by the test timeout.
   */
  async until<T>(check: () => T | undefined): Promise<T> {
    for (;;) {
      const found = check();
      if (found !== undefined) return found;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, 20);
        this.waiters.add(wake);
      });
    }
  }

  /** The first result of `requestId` on out. */
  resultOf(requestId: string): Promise<ResultEnvelope> {
    return this.until(() => this.results.get(requestId)?.[0]);
  }

  /** The calls the target received whose path contains `marker`, in arrival order. */
  callsWith(marker: string) {
    return this.target.calls.filter((c) => c.path.includes(marker));
  }

  /** A fresh Redis key prefix for a policy module; its keys are deleted at close. */
  prefix(name: string): string {
    const prefix = `${uniqueName(name)}:`;
    this.onClose(async () => {
      const keys: string[] = [];
      for await (const batch of (this.redis as Redis).scanStream({ match: `${prefix}*`, count: 1_000 }))
        keys.push(...(batch as string[]));
      if (keys.length > 0) await this.redis.del(...keys);
    });
    return prefix;
  }

  /**
   * An origin pacer as the executor role makes one, on a fresh prefix, closed with the harness;
   * long `Retry-After` holds are kept whole, so that a wait shows in the test.
   */
  pacer(): OriginPacer {
    const pacer = new OriginPacer({
      redis: this.redis,
      prefix: this.prefix('pace'),
      maxLimit: 16,
      retryAfterMaxMs: 3_600_000,
      freeForMs: 1_000,
    });
    this.onClose(() => pacer.close());
    return pacer;
  }

  newQueue(): FairQueue {
    const queue = new FairQueue({
      redis: this.redis,
      prefix: `${uniqueName('ex')}:`,
      shards: 8,
      logger: silentLogger,
    });
    this.onClose(async () => {
      await new QueueAdmin(queue).purge();
      await queue.close();
    });
    return queue;
  }

  /** A new queue (see newQueue) that counts the leases of each request: `leased`, by requestId. */
  countingQueue(): { queue: FairQueue; leased: Map<string, number> } {
    const queue = this.newQueue();
    const leased = new Map<string, number>();
    const lease = queue.lease.bind(queue);
    queue.lease = async (...args) => {
      const answer = await lease(...args);
      for (const task of answer.tasks) {
        const { requestId } = decodeQueuedTask(task.payload);
        leased.set(requestId, (leased.get(requestId) ?? 0) + 1);
      }
      return answer;
    };
    return { queue, leased };
  }

  /**
   * Writes raw `in` values to one Kafka partition (so offsets follow from the base offset) and
   * publishes their offset-refs to the queue, as the router does.
   */
  async submitRaw(
    queue: FairQueue,
    items: Array<{
      requestId: string;
      partition?: string;
      /** The client whose partition the task is queued in (none: the anonymous client). */
      client?: string;
      value: string;
      headers?: Record<string, string>;
      /** Carried in the task as the router does for small records (QUEUE_INLINE_BYTES). */
      inline?: InlineRecord;
      /** Its queue priority (`meta.priority`, as the router publishes it). */
      priority?: number;
    }>,
    offsetShift = 0,
  ): Promise<void> {
    const kafkaPartition = Math.floor(Math.random() * 3);
    const [meta] = await this.producer.send(
      this.inTopic,
      items.map((item) => ({
        partition: kafkaPartition,
        key: item.requestId,
        value: item.value,
        ...(item.headers && { headers: item.headers }),
      })),
    );
    const base = BigInt(meta?.baseOffset ?? '0');
    await queue.publish(
      items.map((item, i) => ({
        id: taskId(item.client, item.requestId, 0),
        partition: queuePartition(item.client, item.partition, item.requestId),
        payload: encodeQueuedTask({
          ref: {
            topic: this.inTopic,
            partition: kafkaPartition,
            offset: String(base + BigInt(i + offsetShift)),
          },
          requestId: item.requestId,
          tryCount: 0,
          ...(item.inline && { inline: item.inline }),
        }),
        ...(item.priority ? { priority: item.priority } : {}),
      })),
    );
  }

  submit(queue: FairQueue, envelopes: RequestEnvelopeInput[]): Promise<void> {
    return this.submitRaw(
      queue,
      envelopes.map((e) => ({
        requestId: e.meta.requestId,
        ...(e.meta.partition === undefined ? {} : { partition: e.meta.partition }),
        ...(e.meta.priority ? { priority: e.meta.priority } : {}),
        value: JSON.stringify(e),
      })),
    );
  }

  /**
   * An executor on a fresh queue (or `options.queue`) writing to the harness's out and DLQ,
   * calling 127.0.0.1 targets; any option (policy modules included) may be overridden.
   */
  startExecutor(
    options: Partial<Omit<ExecutorOptions, 'queue'>> & {
      queue?: FairQueue;
      allow?: string[];
      responseTimeoutMs?: number;
    } = {},
  ) {
    const { allow, responseTimeoutMs, ...overrides } = options;
    const queue = options.queue ?? this.newQueue();
    const fetcher = testKafka().fetcher();
    const http = createHttpClient({
      connectTimeoutMs: 2_000,
      responseTimeoutMs: responseTimeoutMs ?? 10_000,
      maxResponseBytes: 1 << 20,
      followRedirects: false,
      allowPrivateTargets: allow ?? ['127.0.0.1'],
    });
    const executor = new Executor({
      fetcher,
      http,
      producer: this.producer,
      topicOut: this.outTopic,
      topicDlq: this.dlqTopic,
      maxWorkers: 8,
      leaseTtlMs: 10_000,
      produceTimeoutMs: 10_000,
      logger: silentLogger,
      ...overrides,
      queue,
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
    this.onClose(stop);
    return { queue, executor, stop };
  }

  private async collect(
    topic: string,
    add: (key: string, value: string, headers: Record<string, string>) => void,
  ): Promise<void> {
    const collector = testKafka().consumer({ groupId: uniqueName('ex-collector') });
    this.collectors.push(collector);
    await consumeEach(collector, topic, (message) => {
      const headers = Object.fromEntries(
        Object.entries(message.headers).map(([name, value]) => [name, String(value)]),
      );
      add(message.key?.toString() ?? '', message.value?.toString() ?? 'null', headers);
      for (const wake of [...this.waiters]) wake();
    });
  }
}
