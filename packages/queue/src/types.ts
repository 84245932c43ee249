/**
 * The queue's public types, in one file that imports nothing of the queue: the scripts, the façade
 * and the admin all depend on it, and it on none of them, so the modules form no import cycle.
 */
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';

export interface FairQueueOptions {
  redis: RedisClient;
  /** Prepended to every key (`<prefix>{q:S}:ready`, ...). Default `rq:`. */
  prefix?: string;
  /** Label of this queue's metrics. Default: the prefix. */
  name?: string;
  /** Shard count; every process of one queue must use the same value. Default 128. */
  shards?: number;
  /** How long an acked task id stays refused by publish. Default 24 h. */
  dedupWindowMs?: number;
  /**
   * Most tasks of one unordered partition in flight at once; 0 = unlimited (default). Ordered
   * partitions (`!` prefix) always have at most one. Must be the same in every process.
   */
  partitionConcurrency?: number;
  /** A task whose lease expired this many times goes to the dead letters; 0 = never (default). */
  maxDeliveries?: number;
  /** Most timers promoted / leases reclaimed by one lease call per shard. Default 256. */
  housekeepingBatch?: number;
  /** Most tasks per publish script call (bounds one script's run time). Default 500. */
  publishBatch?: number;
  /**
   * How often lease() re-reads the state of every shard (one small read script per shard,
   * pipelined). Between refreshes it visits only shards it knows to have work; work published by
   * other processes is announced on a pub/sub channel (`notify`). Default 1000 ms; 0 = every call.
   */
  refreshMs?: number;
  /**
   * How many shards one lease call aims to visit when partitions are few (fewer script calls, a
   * coarser interleaving across shards). Default 8.
   */
  shardsPerLease?: number;
  /** Upper bound of `nextWakeMs`. Default 1000 ms. */
  maxIdleMs?: number;
  /** Announce newly available work on `<prefix>wake` so idle workers wake early. Default true. */
  notify?: boolean;
  /**
   * Largest payload accepted (bytes, UTF-8): Redis coordinates, it does not store fat documents
   * (large bodies stay in Kafka as offset-refs). Default 64 KiB.
   */
  maxPayloadBytes?: number;
  /**
   * A publish is confirmed only once this many replicas of each shard's master have it (`WAIT`),
   * so that a failover cannot lose it (see replicas.ts). Default none.
   */
  publishReplicas?: { replicas: number; timeoutMs: number };
  logger?: Logger;
}

export interface PublishTask {
  /** Unique task id (`requestId:tryCount`): publish is idempotent by it. */
  id: string;
  /** Fairness unit; `!`-prefixed = ordered. Default: the task id (a partition of its own). */
  partition?: string;
  /** Small opaque string (an offset-ref JSON or a small inline task). */
  payload: string;
  /** Due time, epoch ms (the caller's clock). Default: now (Redis clock). */
  dueAt?: number;
  /** Due in this many ms from now (Redis clock); used when dueAt is not given. */
  delayMs?: number;
  /**
   * -10 (lowest) to 10 (highest), default 0: inside its client's share, a ready partition whose
   * head ranks higher is served first (README, "Priority"); never across clients' shares.
   */
  priority?: number;
}

export type PublishResult = 'queued' | 'duplicate';

export interface LeasedTask {
  id: string;
  partition: string;
  payload: string;
  /** Present it to extend/ack/reject/deadLetter; refused once the lease was reclaimed. */
  token: string;
  /** How many times this task has been leased, this lease included (1 = first delivery). */
  deliveries: number;
  /** Epoch ms (Redis clock) of the first publish. */
  publishedAt: number;
  /** Epoch ms at which the task became due. */
  dueAt: number;
  ordered: boolean;
  /** Its priority when not 0 (`PublishTask.priority`). */
  priority?: number;
}

export interface LeaseResult {
  tasks: LeasedTask[];
  /** 0 when tasks were returned; else how long an idle worker may sleep (≤ maxIdleMs). */
  nextWakeMs: number;
}

/**
 * What extend and the settlements answer per token: `ok`, or `stale`: the lease was reclaimed
 * (expired) or already settled — the task is not yours.
 */
export type TokenResult = 'ok' | 'stale';

/** @deprecated Use `TokenResult` (an extend is not a settlement). */
export type SettleResult = TokenResult;

export interface ReclaimResult {
  reclaimed: number;
  deadLettered: number;
}

/** A cap slot (`cap/commands/acquire-2.lua`) bound to a lease of a capped client. */
export interface CapSlot {
  client: string;
  /** The slot's id in the client's `held` set. */
  permit: string;
}

/** @deprecated Use `CapSlot` ("hold" names an origin held back, see the glossary). */
export type CapHold = CapSlot;

/** Called after each step of a long operation (shards visited, or dead letters handled). */
export type Progress = (done: number, total: number) => void;

export interface ShardInfo {
  shard: number;
  /** Tasks waiting to be leased (due or not). */
  pending: number;
  /** Tasks leased and not yet settled. */
  inFlight: number;
  dead: number;
  /** Partitions in the round-robin now. */
  readyPartitions: number;
  /** Partitions waiting for a due time (delayed head, ordered partition blocked after a reject). */
  waitingPartitions: number;
  /** Partitions with pending tasks held back by their in-flight limit (ordered: one at a time). */
  blockedPartitions: number;
  /** Publish time (epoch ms, second resolution) of the oldest pending (not leased) task. */
  oldestPublishedAt: number | null;
  /** Acked ids inside the dedup window. */
  dedupIds: number;
}

export interface QueueInfo {
  shards: ShardInfo[];
  totals: Omit<ShardInfo, 'shard' | 'oldestPublishedAt'>;
  /**
   * Age of the oldest task waiting to be leased (second resolution, Redis clock; time since its
   * first publish); null when nothing is pending.
   */
  oldestTaskAgeMs: number | null;
}

export interface DeadTask {
  id: string;
  partition: string;
  payload: string;
  reason: string;
  deadAt: number;
  deliveries: number;
  publishedAt: number;
  shard: number;
}

/** What one shard knows of a client with pending tasks. */
export interface ClientShardView {
  /** '' for tasks without a client (partition names without ` @<client>`). */
  client: string;
  pending: number;
  /**
   * Its partitions whose head is due and may run: what it has in the fair share now (null: not
   * counted, in a read of the fronts only).
   */
  readyPartitions: number | null;
  /** First publish (ms) of the task its fair-share turn would lease next; null when none is ready. */
  oldestReadyPublishedAt: number | null;
}

/** A client across every shard (`QueueAdmin.clients`). */
export interface ClientInfo {
  client: string;
  pending: number;
  /** Its partitions whose head is due and may run; null: not counted (`readyPartitions: false`). */
  readyPartitions: number | null;
  /** Its weight (`setClientWeight`; 1 by default). */
  weight: number;
  /** Its cap of tasks in flight across executors (`setClientMaxInFlight`); null: none. */
  maxInFlight: number | null;
  /** Its tasks in flight (the cap slots it holds); null when it has no cap (not counted then). */
  inFlight: number | null;
  /**
   * How long the oldest of the tasks its turns would lease next has waited since its first publish
   * (the longest current wait of the client's ready work); null when none is ready.
   */
  oldestReadyAgeMs: number | null;
}

/** One partition of the sample `partitions` takes, and the task at its head. */
export interface PartitionView {
  partition: string;
  shard: number;
  /**
   * ready: in the round-robin now; waiting: its head is due later (a schedule, a retry backoff, a
   * wait for a limiter or an open breaker, or an ordered partition held after a reject); blocked:
   * its in-flight limit is reached (ordered: one at a time); idle: nothing pending.
   */
  state: 'ready' | 'waiting' | 'blocked' | 'idle';
  pending: number;
  inFlight: number;
  /** When a waiting partition's head becomes due (epoch ms). */
  wakeAt: number | null;
  head: {
    id: string;
    dueAt: number;
    deliveries: number;
    publishedAt: number;
    /** The queued task (JSON of `encodeQueuedTask`): its try count and time waited. */
    payload: string;
  } | null;
}

/**
 * The states `listTasks` walks: due (pending, due now), later (pending, due later: a schedule inside
 * REDIS_HORIZON, a backoff, a wait), leased (in flight), dead (the queue's dead tasks).
 */
export type TaskListState = 'due' | 'later' | 'leased' | 'dead';

export interface TaskListFilter {
  /** One partition (its full name, client namespace included). */
  partition?: string;
  /** A client's tasks (its partitions' ` @<client>`); '' = tasks without a client. */
  client?: string;
  /** The state's time (due: due time; leased: lease deadline; dead: dead time), ms: at or after. */
  from?: number;
  /** … before. */
  to?: number;
  /** Only tasks first published before (ms): an age filter. */
  publishedBefore?: number;
}

export interface ListedTask {
  id: string;
  partition: string;
  shard: number;
  dueAt: number;
  deliveries: number;
  publishedAt: number;
  payload: string;
  /** The state's time: due time (due, later), lease deadline (leased), dead time (dead). */
  at: number;
  /** -10..10 (0: the default). */
  priority: number;
  /** leased: the lease token. */
  token?: string;
  /** dead: why. */
  reason?: string;
}

export interface TaskListPage {
  tasks: ListedTask[];
  /** The cursor of the following page; null: the list is done. */
  next: string | null;
  nowMs: number;
}
