import { longestCallMs } from '@requester/policies';
import type { Config } from '@requester/shared/config';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import { queuePartition } from '@requester/shared/task';
import { ClusterBulkhead } from './cluster.ts';
import { type Bulkhead, defaultMaxPerOrigin, LocalBulkhead } from './local.ts';

export { ClusterBulkhead } from './cluster.ts';
export { SlotLine, type Waiter } from './line.ts';
export {
  type Bulkhead,
  capOf,
  defaultMaxPerOrigin,
  type Granted,
  IN_PROCESS_WAIT_MS,
  LocalBulkhead,
  MAX_WAIT_MS,
  MIN_WAIT_MS,
  OriginLoad,
  type SlotGrant,
  waitForSlotMs,
} from './local.ts';

/**
 * The bulkhead configured by MAX_WORKERS_PER_ORIGIN and ORIGIN_CONCURRENCY_SCOPE; `weightOf`: the
 * clients' weights (the queue's, ClientWeights), for the order its waits are served in.
 */
export function bulkheadFromConfig(
  config: Pick<
    Config,
    | 'maxWorkers'
    | 'maxWorkersPerOrigin'
    | 'originConcurrencyScope'
    | 'redisPrefix'
    | 'targetConnectTimeout'
    | 'targetResponseTimeout'
  >,
  redis: RedisClient,
  logger?: Logger,
  weightOf?: (client: string) => number,
): Bulkhead {
  const maxPerOrigin = config.maxWorkersPerOrigin ?? defaultMaxPerOrigin(config.maxWorkers);
  const weights = weightOf ? { weightOf } : {};
  if (config.originConcurrencyScope === 'process') return new LocalBulkhead({ maxPerOrigin, ...weights });
  return new ClusterBulkhead({
    redis,
    prefix: `${config.redisPrefix}:bulkhead:`,
    maxPerOrigin,
    leaseMs: longestCallMs(config),
    ...(logger ? { logger } : {}),
    ...weights,
  });
}

/**
 * The partition a request's call waits in at a full origin (SlotLine's unit of turns inside a
 * client): its queue partition, the client left out (the line is per client already).
 */
export function linePartition(meta: { partition?: string | undefined; requestId: string }): string {
  return queuePartition(undefined, meta.partition, meta.requestId);
}
