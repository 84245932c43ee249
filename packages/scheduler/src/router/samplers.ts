import { type FairQueue, QueueAdmin } from '@requester/queue';
import type { KafkaAdmin } from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import { gauge, type Sampler, startSampler } from '@requester/shared/metrics';

/**
 * What the routers sample into /metrics on a timer (METRICS_SAMPLE_INTERVAL), for dashboards,
 * alerts and the executors' autoscaler — never on the hot path:
 * - the queue: QueueAdmin.info (one script per shard: task counts by state, partitions by state,
 *   oldest pending task), so every state is exported by the running service;
 * - the consumer lag of `in`: the group's committed offsets against the high watermarks, two
 *   small admin requests per interval whatever the traffic;
 * - the open circuit breakers, when the process wires their listing in (it sets `breaker_open*`).
 * Every router samples the same numbers: aggregate with max(), not sum().
 */
const lag = gauge(
  'kafka_consumer_lag',
  'records of a topic partition not yet committed by a consumer group (high watermark − committed offset; sampled by the routers for in)',
  ['group', 'topic', 'partition'],
);

export interface ConsumerLag {
  partition: number;
  lag: number;
}

/**
 * Lag of `groupId` on each partition of `topic`. A partition the group never committed counts
 * every record it still holds (high − low watermark): that is what the group would read.
 */
export async function consumerLag(admin: KafkaAdmin, groupId: string, topic: string): Promise<ConsumerLag[]> {
  const [watermarks, committed] = await Promise.all([
    admin.topicOffsets(topic),
    admin.committedOffsets(groupId, topic),
  ]);
  const commits = new Map(committed.map((p) => [p.partition, Number(p.offset)]));
  return watermarks.map((w) => {
    const high = Number(w.high);
    const commit = commits.get(w.partition) ?? -1;
    const from = commit >= 0 ? commit : Number(w.low);
    return { partition: w.partition, lag: Math.max(0, high - from) };
  });
}

export interface RouterSamplerOptions {
  queue: FairQueue;
  /** An admin client of the cluster; connected by the sampler, disconnected when it stops. */
  admin: KafkaAdmin;
  groupId: string;
  topicIn: string;
  intervalMs: number;
  logger: Logger;
  /** CircuitBreaker.openOrigins, which samples the `breaker_open*` gauges itself. */
  openOrigins?: () => Promise<unknown>;
}

export function startRouterSamplers(options: RouterSamplerOptions): Sampler {
  const { queue, admin, groupId, topicIn, intervalMs, logger, openOrigins } = options;
  const queueAdmin = new QueueAdmin(queue);
  const queueSampler = startSampler(
    'queue',
    intervalMs,
    async () => {
      await queueAdmin.info();
      // the per-client gauges (largest backlogs + `other`)
      await queueAdmin.sampleClients();
    },
    logger,
  );
  let connected = false;
  const lagSampler = startSampler(
    'in consumer lag',
    intervalMs,
    async () => {
      if (!connected) {
        await admin.connect();
        connected = true;
      }
      for (const { partition, lag: records } of await consumerLag(admin, groupId, topicIn))
        lag.set({ group: groupId, topic: topicIn, partition: String(partition) }, records);
    },
    logger,
  );
  const breakerSampler =
    openOrigins && startSampler('open breakers', intervalMs, async () => void (await openOrigins()), logger);
  return {
    async stop() {
      await Promise.all([queueSampler.stop(), lagSampler.stop(), breakerSampler?.stop()]);
      if (connected) await admin.disconnect().catch(() => undefined);
    },
  };
}
