/**
 * @requester/queue: the Redis fair queue (README.md). Tasks in partitions that take turns, ordered
 * partitions, leases with tokens and reclaim, idempotent publish, dead letters; Lua scripts on
 * single shards, so it runs on a Redis Cluster. Its Redis layout is its own: callers use these
 * classes, never its keys.
 */
export { CLIENT_METRICS_TOP, QueueAdmin } from './admin.ts';
export { CAP_GRACE_MS } from './cap/index.ts';
export { queueFromConfig } from './config.ts';
export {
  CLIENT_SEPARATOR,
  clientOfPartition,
  isOrderedPartition,
  ORDERED_PREFIX,
  parseToken,
  shardOfPartition,
} from './keys.ts';
export { FairQueue } from './queue.ts';
export type {
  CapHold,
  CapSlot,
  ClientInfo,
  ClientShardView,
  DeadTask,
  FairQueueOptions,
  LeasedTask,
  LeaseResult,
  ListedTask,
  PartitionView,
  Progress,
  PublishResult,
  PublishTask,
  QueueInfo,
  ReclaimResult,
  SettleResult,
  ShardInfo,
  TaskListFilter,
  TaskListPage,
  TaskListState,
  TokenResult,
} from './types.ts';
export { MAX_PRIORITY, MIN_PRIORITY } from './validation.ts';
export { ClientWeights, MAX_CLIENT_WEIGHT, WEIGHTS_REFRESH_MS } from './weights.ts';
