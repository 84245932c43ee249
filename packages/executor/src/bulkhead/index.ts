import { longestCallMs } from '@requester/policies';
import type { Config } from '@requester/shared/config';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import { ClusterBulkhead } from './cluster.ts';
import { type Bulkhead, defaultMaxPerOrigin, LocalBulkhead } from './local.ts';

export { ClusterBulkhead } from './cluster.ts';
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
  SlotLine,
  waitForSlotMs,
} from './local.ts';

/** The bulkhead configured by MAX_WORKERS_PER_ORIGIN and ORIGIN_CONCURRENCY_SCOPE. */
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
): Bulkhead {
  const maxPerOrigin = config.maxWorkersPerOrigin ?? defaultMaxPerOrigin(config.maxWorkers);
  if (config.originConcurrencyScope === 'process') return new LocalBulkhead({ maxPerOrigin });
  return new ClusterBulkhead({
    redis,
    prefix: `${config.redisPrefix}:bulkhead:`,
    maxPerOrigin,
    leaseMs: longestCallMs(config),
    ...(logger ? { logger } : {}),
  });
}
