import { createKafka, type KafkaClient, type KafkaProducer } from '@requester/shared';
import {
  type PrivateKafka,
  silentLogger,
  startPrivateKafka,
  startTarget,
  type Target,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  crashDrill,
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  stackEnv,
  unanswered,
} from './stack.fixture.ts';

/**
 * docs/architecture.md §7: no task is lost when a dependency restarts. The broker carries `in` (read by the
 * router, and by offset by the executor's fetcher) and `out`: it is killed with SIGKILL while
 * tasks are queued and in flight, and started again on the same data. The running requester rides
 * it out — producers, consumers and the fetcher reconnect — and every task is answered.
 */
describe('Kafka broker killed (kill -9) and restarted while 300 tasks are in flight', () => {
  const TASKS = 300;
  let broker: PrivateKafka;
  let kafka: KafkaClient;
  let stack: StackEnv;
  let target: Target;
  let results: ResultCollector;
  let producer: KafkaProducer;

  beforeAll(async () => {
    broker = await startPrivateKafka();
    kafka = createKafka({ brokers: broker.brokers, clientId: 'kafka-crash', logger: silentLogger });
    target = await startTarget();
    stack = await stackEnv({ KAFKA_BROKERS: broker.brokers, MAX_WORKERS: '16', EXECUTOR_LEASE_TTL: '3s' });
    const admin = kafka.admin();
    await admin.connect();
    const { topicIn, topicOut, topicDlq } = stack.config;
    await admin.ensureTopics(
      [topicIn, topicOut, topicDlq].map((topic) => ({ topic, numPartitions: 3, replicationFactor: 1 })),
    );
    await admin.disconnect();
    results = new ResultCollector(topicOut, kafka);
    await results.start();
    producer = await kafkaProducer(kafka);
  }, 180_000);

  afterAll(async () => {
    await producer?.disconnect();
    await results?.stop();
    await target?.close();
    await broker?.stop();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('every task ends up on out', async () => {
    const { ids, atCrash } = await crashDrill({
      stack,
      results,
      producer,
      targetUrl: target.url,
      dependency: broker,
      prefix: 'k',
      count: TASKS,
      recoveryMs: 150_000,
    });
    expect(atCrash).toBeLessThan(TASKS);
    expect(unanswered(results, ids)).toEqual({ missing: [], failed: [] });
  }, 300_000);
});
