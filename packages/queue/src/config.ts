import type { Config } from '@requester/shared/config';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import { FairQueue } from './queue.ts';
import type { FairQueueOptions } from './types.ts';

/**
 * The task queue of a deployment, built from its configuration. Every process that touches the
 * queue (router, executor, admin CLI) builds it here, so all of them address the same keys/shards.
 */
export function queueFromConfig(
  config: Pick<Config, 'redisPrefix' | 'queueShards' | 'queueDedupWindow'> &
    Partial<Pick<Config, 'queuePublishReplicas' | 'queuePublishReplicaTimeout'>>,
  redis: RedisClient,
  options: Partial<FairQueueOptions> & { logger?: Logger } = {},
): FairQueue {
  return new FairQueue({
    redis,
    prefix: `${config.redisPrefix}:`,
    shards: config.queueShards,
    dedupWindowMs: config.queueDedupWindow,
    publishReplicas: {
      replicas: config.queuePublishReplicas ?? 0,
      timeoutMs: config.queuePublishReplicaTimeout ?? 500,
    },
    ...options,
  });
}
