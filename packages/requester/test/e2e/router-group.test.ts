import { queueFromConfig } from '@requester/queue';
import { createRedis, type KafkaProducer, type RedisClient, routerGroupOf } from '@requester/shared';
import { eventually, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  type StackEnv,
  stackEnv,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * Two deployments on one broker, each with topics of its own and the default KAFKA_CLIENT_ID. In
 * one consumer group, each router would be assigned partitions of the other's `in` that it does
 * not read, and the records there would wait for as long as both run.
 */
describe('two deployments with the default client id on one broker', () => {
  const stacks: StackEnv[] = [];
  const running: RunningProcess[] = [];
  let producer: KafkaProducer;
  let redis: RedisClient;

  beforeAll(async () => {
    for (let i = 0; i < 2; i++) stacks.push(await stackEnv({ KAFKA_CLIENT_ID: 'requester' }));
    for (const stack of stacks) running.push(await startStack(stack, ['router']));
    for (const stack of stacks) await waitReady(stack);
    producer = await kafkaProducer();
    redis = createRedis({ url: stacks[0]?.config.redisUrl ?? '' });
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    for (const process of running) await process.shutdown('test over');
    for (const stack of stacks) {
      const keys = await redis.keys(`${stack.name}*`);
      if (keys.length > 0) await redis.del(...keys);
      await dropStackDatabase(stack);
    }
    redis?.disconnect();
  }, 60_000);

  it('have routers in groups of their own, and each routes every record of its in', async () => {
    const groups = stacks.map((stack) => routerGroupOf(stack.config));
    expect(new Set(groups).size).toBe(2);
    // Keys spread over every partition of each `in` (3 each).
    const count = 12;
    for (const stack of stacks)
      await producer.send(
        stack.config.topicIn,
        Array.from({ length: count }, () => {
          const requestId = uniqueName('group');
          return { key: requestId, value: JSON.stringify({ request: { uri: '' }, meta: { requestId } }) };
        }),
      );
    for (const stack of stacks) {
      const queue = queueFromConfig(stack.config, redis, { notify: false });
      await eventually(
        async () => (await queue.pendingDepth()) === count,
        30_000,
        `every record of ${stack.config.topicIn} routed`,
      );
    }
  }, 90_000);
});
