/**
 * @requester/queue: the Redis fair queue (README.md). Tasks in partitions that take turns, ordered
 * partitions, leases with tokens and reclaim, idempotent publish, dead letters; Lua scripts on
 * single shards, so it runs on a Redis Cluster. Its Redis layout is its own: callers use these
 * classes, never its keys.
 */
export {
  CLIENT_METRICS_TOP,
  type ClientInfo,
  type ClientShardView,
  type DeadTask,
  type ListedTask,
  type PartitionView,
  type Progress,
  QueueAdmin,
  type QueueInfo,
  type ShardInfo,
  type TaskListFilter,
  type TaskListPage,
  type TaskListState,
} from './admin.ts';
export { queueFromConfig } from './config.ts';
export {
  CAP_GRACE_MS,
  type CapHold,
  CLIENT_SEPARATOR,
  clientOfPartition,
  FairQueue,
  type FairQueueOptions,
  isOrderedPartition,
  type LeasedTask,
  type LeaseResult,
  MAX_CLIENT_WEIGHT,
  ORDERED_PREFIX,
  type PublishResult,
  type PublishTask,
  parseToken,
  type ReclaimResult,
  type SettleResult,
  shardOfPartition,
} from './queue.ts';
