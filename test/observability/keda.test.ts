import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FairQueue, QueueAdmin, queueFromConfig } from '../../packages/queue/src/index.ts';
import type { RunningProcess } from '../../packages/requester/src/runtime/index.ts';
import {
  dropStackDatabase,
  type StackEnv,
  stackEnv,
  startStack,
  waitReady,
} from '../../packages/requester/test/e2e/stack.fixture.ts';
import { createRedis, type RedisClient } from '../../packages/shared/src/index.ts';
import { eventually } from '../../packages/shared/src/testing/index.ts';
import { type Manifest, render } from '../deploy/k8s.ts';
import { ROOT, type RunningPrometheus, startPrometheus } from './promql.ts';

/**
 * The executors' KEDA query (infra/k8s, production overlay) against a real Prometheus scraping a
 * running router, in the two queue shapes that tell a backlog from work that can run now: one
 * deep ordered partition (one runnable task however deep) and many ready partitions. The desired
 * replica count is computed as KEDA's HPA does: ceil(value / threshold), within the bounds.
 */
describe('the executors scale on work that can run now', () => {
  const executor = render(join(ROOT, 'infra/k8s/overlays/production')).find(
    (object) => object.kind === 'ScaledObject' && object.metadata.name === 'requester-executor',
  ) as Manifest;
  const trigger = executor.spec.triggers.find((t: { type: string }) => t.type === 'prometheus');
  const namespace = executor.metadata.namespace as string;
  let stack: StackEnv;
  let running: RunningProcess;
  let redis: RedisClient;
  let queue: FairQueue;
  let prometheus: RunningPrometheus;

  /** The replicas KEDA's HPA asks for at `value`. */
  const desired = (value: number) =>
    Math.min(
      executor.spec.maxReplicaCount,
      Math.max(executor.spec.minReplicaCount, Math.ceil(value / Number(trigger.metadata.threshold))),
    );
  /** The query's single value once it equals `expected` (the sampler and the scrape lag behind). */
  const settlesAt = async (expr: string, expected: number) => {
    let values: number[] = [];
    await eventually(
      async () => {
        values = await prometheus.query(expr);
        return values.length === 1 && values[0] === expected;
      },
      30_000,
      `${expr} = ${expected}`,
      () => `last answer: ${JSON.stringify(values)}`,
    );
  };
  const publish = (count: number, partition?: string) =>
    queue.publish(
      Array.from({ length: count }, (_, i) => ({
        id: `${partition ?? 'own'}-${i}`,
        ...(partition ? { partition } : {}),
        payload: '{}',
      })),
    );

  beforeAll(async () => {
    // Only a router: it samples the queue, and no executor drains it.
    stack = await stackEnv({ METRICS_SAMPLE_INTERVAL: '200ms' });
    running = await startStack(stack, ['router']);
    await waitReady(stack);
    redis = createRedis({ url: stack.config.redisUrl });
    queue = queueFromConfig(stack.config, redis);
    // The namespace label is what the PodMonitor's scrape adds to every series of the pods.
    prometheus = await startPrometheus([new URL(stack.adminUrl).host], { namespace });
  }, 120_000);

  afterAll(async () => {
    await prometheus?.stop();
    if (queue) await new QueueAdmin(queue).destroy();
    redis?.disconnect();
    await running?.shutdown('test over');
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('filters on its namespace, and reads nothing from another one', async () => {
    expect(trigger.metadata.query).toContain(`namespace="${namespace}"`);
    await settlesAt(trigger.metadata.query, 0);
    expect(await prometheus.query(trigger.metadata.query.replaceAll(namespace, 'elsewhere'))).toEqual([]);
  });

  it('one deep ordered partition: one runnable task, so the minimum, where pending asks for the maximum', async () => {
    await publish(400, '!deep');
    await settlesAt(trigger.metadata.query, 1);
    expect(desired(1)).toBe(executor.spec.minReplicaCount);
    // The old signal: every task behind the head counts.
    await settlesAt(`max(requester_queue_depth{namespace="${namespace}",state="pending"})`, 400);
    expect(desired(400)).toBeGreaterThan(executor.spec.minReplicaCount);
  });

  it('many ready partitions, and tasks in flight: each counts', async () => {
    await publish(300);
    await settlesAt(trigger.metadata.query, 301);
    // Leased tasks leave the ready partitions for the in-flight count: the sum stays.
    // One lease call may visit only some shards: lease until 50 are out (301 are ready).
    let leased = 0;
    while (leased < 50) leased += (await queue.lease(50 - leased, 60_000)).tasks.length;
    await settlesAt(`max(requester_queue_depth{namespace="${namespace}",state="leased"})`, 50);
    await settlesAt(trigger.metadata.query, 301);
    expect(desired(301)).toBe(Math.ceil(301 / Number(trigger.metadata.threshold)));
  });
});
