import { breakerFromConfig, type CircuitBreaker } from '@requester/policies';
import { queueFromConfig } from '@requester/queue';
import { createRedis, type KafkaProducer, type RedisClient } from '@requester/shared';
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

const INTERVAL_MS = 100;
const SEVERAL_SAMPLES_MS = 20 * INTERVAL_MS;
const ORIGIN = 'https://down.example:443';

/**
 * The router role as the process wires it: its breaker rule reads the executor's real circuit
 * breaker (shared through Redis), its depth rule the real queue. No executor runs, so routed
 * tasks stay pending.
 */
describe('router backpressure in a running process', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let producer: KafkaProducer;
  let redis: RedisClient;
  let breaker: CircuitBreaker;

  beforeAll(async () => {
    stack = await stackEnv({
      QUEUE_HIGH_WATERMARK: '3',
      QUEUE_LOW_WATERMARK: '1',
      ROUTER_BREAKER_PAUSE_AFTER: '100ms',
      ROUTER_BACKPRESSURE_INTERVAL: `${INTERVAL_MS}ms`,
      BREAKER_FAILURE_THRESHOLD: '2',
      BREAKER_OPEN_DURATION: '1s',
      BREAKER_STATE_CACHE: '0s',
    });
    running = await startStack(stack, ['router']);
    await waitReady(stack);
    producer = await kafkaProducer();
    redis = createRedis({ url: stack.config.redisUrl });
    breaker = breakerFromConfig(stack.config, redis);
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    await running?.shutdown('test over');
    const keys = await redis.keys(`${stack.name}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis?.disconnect();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const paused = async (reason: string) => {
    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    return metrics.includes(`requester_router_paused{reason="${reason}"} 1`);
  };
  const pending = () => queueFromConfig(stack.config, redis, { notify: false }).pendingDepth();
  const send = (count: number) =>
    producer.send(
      stack.config.topicIn,
      Array.from({ length: count }, () => {
        const requestId = uniqueName('bp');
        return { key: requestId, value: JSON.stringify({ request: { uri: '' }, meta: { requestId } }) };
      }),
    );

  async function failTwice(): Promise<void> {
    for (let i = 0; i < 2; i++) {
      const admission = await breaker.admit(ORIGIN);
      if (admission.admitted) await breaker.record(ORIGIN, { ...admission, success: false });
    }
  }

  async function closeByProbe(): Promise<void> {
    await eventually(
      async () => {
        const admission = await breaker.admit(ORIGIN);
        if (!admission.admitted) return false;
        await breaker.record(ORIGIN, { ...admission, success: true });
        return (await breaker.snapshot(ORIGIN)).state === 'closed';
      },
      20_000,
      'the breaker closed by a successful probe',
    );
  }

  it('pauses while a breaker stays open and resumes when it closes; then pauses on depth', async () => {
    await failTwice();
    expect((await breaker.snapshot(ORIGIN)).state).toBe('open');
    await eventually(() => paused('breaker_open'), 20_000, 'paused by the open breaker');

    await send(1);
    await new Promise((resolve) => setTimeout(resolve, SEVERAL_SAMPLES_MS));
    expect(await pending()).toBe(0); // held in Kafka

    await closeByProbe();
    await eventually(async () => (await pending()) === 1, 20_000, 'routed after the breaker closed');
    expect(await paused('breaker_open')).toBe(false);

    await send(2);
    await eventually(() => paused('queue_depth'), 20_000, 'paused at the high watermark');
    expect(await pending()).toBe(3);
  });
});
