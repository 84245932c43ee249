import type { KafkaProducer } from '@requester/shared';
import {
  createTestTopics,
  type PrivateRedis,
  startPrivateRedis,
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
 * docs/architecture.md §7: no task is lost when a dependency restarts. Redis holds the queue, so it must
 * persist (append-only file, fsync every second: a crash of the process loses no acknowledged
 * write). Redis is killed with SIGKILL while tasks are queued and in flight, and started again a
 * moment later on the same data: the running requester rides it out and every task is answered.
 */
describe('Redis killed (kill -9) and restarted while 300 tasks are queued', () => {
  const TASKS = 300;
  let redis: PrivateRedis;
  let stack: StackEnv;
  let target: Target;
  let results: ResultCollector;
  let producer: KafkaProducer;

  beforeAll(async () => {
    redis = await startPrivateRedis({ persistent: true });
    target = await startTarget();
    stack = await stackEnv({ REDIS_URL: redis.url, MAX_WORKERS: '16', EXECUTOR_LEASE_TTL: '3s' });
    const { topicIn, topicOut, topicDlq } = stack.config;
    await createTestTopics([topicIn, topicOut, topicDlq], 3);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    producer = await kafkaProducer();
  });

  afterAll(async () => {
    await producer?.disconnect();
    await results?.stop();
    await target?.close();
    await redis?.stop();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('every task ends up on out', async () => {
    const { ids, atCrash } = await crashDrill({
      stack,
      results,
      producer,
      targetUrl: target.url,
      dependency: redis,
      prefix: 'r',
      count: TASKS,
      recoveryMs: 120_000,
    });
    expect(atCrash).toBeLessThan(TASKS);
    expect(unanswered(results, ids)).toEqual({ missing: [], failed: [] });
  }, 240_000);
});
