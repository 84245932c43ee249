/**
 * The queue's Lua scripts as typed operations: the arguments each `commands/<op>.lua` takes and the
 * parsing of its flat reply, in one place, so that no other module knows a script's layout.
 */
import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';
import { isOrderedPartition, SHARD_KEY_NAMES } from './keys.ts';
import type {
  ClientShardView,
  DeadTask,
  LeasedTask,
  ListedTask,
  PartitionView,
  PublishTask,
  ShardInfo,
  TaskListFilter,
  TaskListState,
} from './types.ts';

/**
 * Every `commands/<op>.lua`, read once per process. Each takes the same keys, those of one shard
 * (`SHARD_KEY_NAMES`, documented in `commands/includes/shard.lua`), hence no key count in the names.
 */
const QUEUE_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'fairQueue', {
  layoutKeys: SHARD_KEY_NAMES.length,
});

type Op =
  | 'publish'
  | 'lease'
  | 'extend'
  | 'ack'
  | 'reject'
  | 'deadLetter'
  | 'reclaim'
  | 'peek'
  | 'info'
  | 'purge'
  | 'retryDead'
  | 'listDead'
  | 'partitions'
  | 'verify'
  | 'clients'
  | 'listTasks';

type Reply = Array<string | number>;

/** What a script tells of its shard: partitions ready, and ms to its next timer (-1: none). */
export interface ShardState {
  readyCount: number;
  nextEvent: number;
}

/**
 * The reply of a script on tokens of one shard (extend, ack, reject, deadLetter): per token, in
 * order, whether its lease was still live.
 */
export interface TokenReply {
  ok: boolean[];
  /**
   * Absent for `extend`, which does not change what is ready. `urgent` (reject): a task above the
   * default priority is due again now, so busy workers should visit the shard first.
   */
  state?: ShardState & { notify: boolean; urgent: boolean };
}

export interface LeaseArgs {
  partitionConcurrency: number;
  shard: number;
  ask: number;
  leaseMs: number;
  maxDeliveries: number;
  housekeepingBatch: number;
  quantum: number;
  /** Capped clients → cap slots the caller holds for this call (lease.lua ARGV[8]). */
  permits: ReadonlyMap<string, number>;
}

export interface Housekeeping {
  reclaimed: number;
  deadLettered: number;
}

/** Where a publish script announces its shard: `<shard>:<inMs>[,!<shard>]<tail>` on `channel`. */
export interface PublishWake {
  channel: string;
  shard: number;
  tail: string;
}

/**
 * The queue's scripts, one typed operation each. `keys` are the keys of one shard
 * (`shardKeys`): every script is single-slot.
 */
export interface QueueScripts {
  /**
   * Per task, in order: queued (true) or refused as a duplicate. With `wake`, the script itself
   * announces the shard on the channel when it notifies (see publish.lua).
   */
  publish(
    keys: readonly string[],
    partitionConcurrency: number,
    dedupWindowMs: number,
    tasks: readonly PublishTask[],
    wake?: PublishWake,
  ): Promise<ShardState & { notify: boolean; clientJoined: boolean; queued: boolean[] }>;
  lease(
    keys: readonly string[],
    args: LeaseArgs,
  ): Promise<ShardState & Housekeeping & { tasks: LeasedTask[]; wanting: string[]; left: string[] }>;
  extend(
    keys: readonly string[],
    leases: ReadonlyArray<{ token: string; leaseMs: number }>,
  ): Promise<TokenReply>;
  ack(
    keys: readonly string[],
    partitionConcurrency: number,
    dedupWindowMs: number,
    tokens: readonly string[],
  ): Promise<TokenReply>;
  /** `payload` '' keeps the task's payload. */
  reject(
    keys: readonly string[],
    partitionConcurrency: number,
    items: ReadonlyArray<{ token: string; delayMs: number; payload: string }>,
  ): Promise<TokenReply>;
  deadLetter(
    keys: readonly string[],
    partitionConcurrency: number,
    items: ReadonlyArray<{ token: string; reason: string }>,
  ): Promise<TokenReply>;
  /** `more`: the batch was full, call again. */
  reclaim(
    keys: readonly string[],
    args: { partitionConcurrency: number; maxDeliveries: number; housekeepingBatch: number },
  ): Promise<ShardState & Housekeeping & { more: boolean }>;
  peek(keys: readonly string[]): Promise<ShardState>;
  info(
    keys: readonly string[],
    partitionConcurrency: number,
  ): Promise<Omit<ShardInfo, 'shard'> & { nowMs: number }>;
  /** `all`: every key but the sequence counters; `destroy`: those too; `dead`: `batch` dead letters. */
  purge(
    keys: readonly string[],
    what: 'all' | 'dead' | 'destroy',
    batch: number,
  ): Promise<{ removed: number; remaining: number }>;
  retryDeadIds(
    keys: readonly string[],
    partitionConcurrency: number,
    ids: readonly string[],
  ): Promise<number>;
  retryDeadAll(
    keys: readonly string[],
    partitionConcurrency: number,
    batch: number,
  ): Promise<{ retried: number; remaining: number }>;
  partitions(
    keys: readonly string[],
    partitionConcurrency: number,
    limit: number,
  ): Promise<{ nowMs: number; partitions: Array<Omit<PartitionView, 'shard'>> }>;
  listDead(keys: readonly string[], limit: number): Promise<Array<Omit<DeadTask, 'shard'>>>;
  verify(
    keys: readonly string[],
    partitionConcurrency: number,
    maxReport: number,
  ): Promise<{ tasks: number; violations: string[] }>;
  /**
   * The clients with pending tasks in the shard; `fronts`: their first partitions only, without
   * their ready counts (null), at a cost bounded by the clients and their weights (clients.lua).
   */
  clients(
    keys: readonly string[],
    reading: 'counted' | 'fronts',
  ): Promise<{ nowMs: number; clients: ClientShardView[] }>;
  /** One bounded step of a list of the shard's tasks in a state (commands/listTasks.lua). */
  listTasks(
    keys: readonly string[],
    args: { state: TaskListState; position: string; limit: number; budget: number; filter: TaskListFilter },
  ): Promise<{ nowMs: number; next: string; tasks: Array<Omit<ListedTask, 'shard'>> }>;
}

function num(reply: Reply, index: number): number {
  return Number(reply[index] ?? 0);
}

function shardState(reply: Reply): ShardState {
  return { readyCount: num(reply, 0), nextEvent: num(reply, 1) };
}

/** The replies of ack, reject and deadLetter: the shard's state, then one flag per token. */
function settledWithState(reply: Reply): TokenReply {
  return {
    state: { ...shardState(reply), notify: num(reply, 2) >= 1, urgent: num(reply, 2) === 2 },
    ok: reply.slice(3).map((r) => Number(r) === 1),
  };
}

/** The head of the lease and reclaim replies: the shard's state and what housekeeping did. */
function housekept(reply: Reply): ShardState & Housekeeping {
  return { ...shardState(reply), reclaimed: num(reply, 2), deadLettered: num(reply, 3) };
}

function leasedTasks(reply: Reply, count: number, from: number): LeasedTask[] {
  const tasks: LeasedTask[] = [];
  for (let t = 0, at = from; t < count; t++, at += 8) {
    const partition = String(reply[at + 1]);
    const priority = Number(reply[at + 7]);
    tasks.push({
      id: String(reply[at]),
      partition,
      payload: String(reply[at + 2]),
      token: String(reply[at + 3]),
      deliveries: Number(reply[at + 4]),
      publishedAt: Number(reply[at + 5]),
      dueAt: Number(reply[at + 6]),
      ordered: isOrderedPartition(partition),
      ...(priority === 0 ? {} : { priority }),
    });
  }
  return tasks;
}

function partitionViews(reply: Reply): Array<Omit<PartitionView, 'shard'>> {
  const views: Array<Omit<PartitionView, 'shard'>> = [];
  for (let i = 0, at = 2; i < Number(reply[1]); i++, at += 10) {
    const [partition, state, pending, inFlight, wakeAt, id, due, deliveries, published, payload] =
      reply.slice(at, at + 10);
    views.push({
      partition: String(partition),
      state: String(state) as PartitionView['state'],
      pending: Number(pending),
      inFlight: Number(inFlight),
      wakeAt: Number(wakeAt) >= 0 ? Number(wakeAt) : null,
      head: id
        ? {
            id: String(id),
            dueAt: Number(due),
            deliveries: Number(deliveries),
            publishedAt: Number(published),
            payload: String(payload),
          }
        : null,
    });
  }
  return views;
}

function deadTasks(reply: Reply): Array<Omit<DeadTask, 'shard'>> {
  const tasks: Array<Omit<DeadTask, 'shard'>> = [];
  for (let i = 0, at = 1; i < Number(reply[0]); i++, at += 7) {
    tasks.push({
      id: String(reply[at]),
      partition: String(reply[at + 1]),
      payload: String(reply[at + 2]),
      reason: String(reply[at + 3]),
      deadAt: Number(reply[at + 4]),
      deliveries: Number(reply[at + 5]),
      publishedAt: Number(reply[at + 6]),
    });
  }
  return tasks;
}

/** Defines the queue scripts on a client (once per client). */
export function loadQueueScripts(redis: RedisClient): QueueScripts {
  const luaRun = luaScripts<Op>(redis, QUEUE_COMMANDS, SHARD_KEY_NAMES.length);
  const run = async (op: Op, keys: readonly string[], args: Array<string | number>) =>
    (await luaRun(op, keys, args)) as Reply;
  return {
    async publish(keys, partitionConcurrency, dedupWindowMs, tasks, wake) {
      const args: Array<string | number> = [
        partitionConcurrency,
        dedupWindowMs,
        wake?.channel ?? '',
        wake?.shard ?? 0,
        wake?.tail ?? '',
        tasks.length,
      ];
      for (const task of tasks) {
        args.push(
          task.id,
          task.partition ?? task.id,
          task.payload,
          task.dueAt ?? 0,
          task.delayMs ?? 0,
          task.priority ?? 0,
        );
      }
      const reply = await run('publish', keys, args);
      return {
        ...shardState(reply),
        notify: num(reply, 2) >= 1,
        clientJoined: num(reply, 2) === 2,
        queued: tasks.map((_, i) => Number(reply[3 + i]) === 1),
      };
    },
    async lease(keys, a) {
      const reply = await run('lease', keys, [
        a.partitionConcurrency,
        a.shard,
        a.ask,
        a.leaseMs,
        a.maxDeliveries,
        a.housekeepingBatch,
        a.quantum,
        a.permits.size,
        ...[...a.permits].flat(),
      ]);
      const n = num(reply, 4);
      const at = 5 + n * 8;
      const wanting = reply.slice(at + 1, at + 1 + num(reply, at)).map(String);
      const leftAt = at + 1 + wanting.length;
      const left = reply.slice(leftAt + 1, leftAt + 1 + num(reply, leftAt)).map(String);
      return { ...housekept(reply), tasks: leasedTasks(reply, n, 5), wanting, left };
    },
    async extend(keys, leases) {
      const reply = await run('extend', keys, [
        leases.length,
        ...leases.flatMap((l) => [l.token, l.leaseMs]),
      ]);
      return { ok: leases.map((_, i) => Number(reply[i]) === 1) };
    },
    async ack(keys, partitionConcurrency, dedupWindowMs, tokens) {
      return settledWithState(
        await run('ack', keys, [partitionConcurrency, dedupWindowMs, tokens.length, ...tokens]),
      );
    },
    async reject(keys, partitionConcurrency, items) {
      const args = items.flatMap((i) => [i.token, i.delayMs, i.payload]);
      return settledWithState(await run('reject', keys, [partitionConcurrency, items.length, ...args]));
    },
    async deadLetter(keys, partitionConcurrency, items) {
      const args = items.flatMap((i) => [i.token, i.reason]);
      return settledWithState(await run('deadLetter', keys, [partitionConcurrency, items.length, ...args]));
    },
    async reclaim(keys, a) {
      const reply = await run('reclaim', keys, [
        a.partitionConcurrency,
        a.maxDeliveries,
        a.housekeepingBatch,
      ]);
      return { ...housekept(reply), more: num(reply, 4) === 1 };
    },
    async peek(keys) {
      return shardState(await run('peek', keys, []));
    },
    async info(keys, partitionConcurrency) {
      const reply = (await run('info', keys, [partitionConcurrency])).map(Number);
      const [pending, inFlight, dead, ready, waiting, blocked, oldestSecond, dedupIds, now] = reply;
      return {
        pending: pending ?? 0,
        inFlight: inFlight ?? 0,
        dead: dead ?? 0,
        readyPartitions: ready ?? 0,
        waitingPartitions: waiting ?? 0,
        blockedPartitions: blocked ?? 0,
        oldestPublishedAt: oldestSecond !== undefined && oldestSecond >= 0 ? oldestSecond * 1000 : null,
        dedupIds: dedupIds ?? 0,
        nowMs: now ?? 0,
      };
    },
    async purge(keys, what, batch) {
      const [removed = 0, remaining = 0] = (await run('purge', keys, [what, batch])).map(Number);
      return { removed, remaining };
    },
    async retryDeadIds(keys, partitionConcurrency, ids) {
      return Number((await run('retryDead', keys, [partitionConcurrency, 'ids', 0, ...ids]))[0]);
    },
    async retryDeadAll(keys, partitionConcurrency, batch) {
      const [retried = 0, remaining = 0] = (
        await run('retryDead', keys, [partitionConcurrency, 'all', batch])
      ).map(Number);
      return { retried, remaining };
    },
    async partitions(keys, partitionConcurrency, limit) {
      const reply = await run('partitions', keys, [partitionConcurrency, limit]);
      return { nowMs: Number(reply[0]), partitions: partitionViews(reply) };
    },
    async listDead(keys, limit) {
      return deadTasks(await run('listDead', keys, [limit]));
    },
    async clients(keys, reading) {
      const reply = await run('clients', keys, [reading === 'fronts' ? 1 : 0]);
      const clients: ClientShardView[] = [];
      for (let i = 0, at = 2; i < Number(reply[1]); i++, at += 4) {
        const oldest = Number(reply[at + 3]);
        clients.push({
          client: String(reply[at]),
          pending: Number(reply[at + 1]),
          readyPartitions: Number(reply[at + 2]) >= 0 ? Number(reply[at + 2]) : null,
          oldestReadyPublishedAt: oldest >= 0 ? oldest : null,
        });
      }
      return { nowMs: Number(reply[0]), clients };
    },
    async listTasks(keys, { state, position, limit, budget, filter }) {
      const reply = await run('listTasks', keys, [
        state,
        position,
        limit,
        budget,
        filter.partition ?? '',
        filter.client === undefined ? '0' : '1',
        filter.client ?? '',
        filter.from ?? '',
        filter.to ?? '',
        filter.publishedBefore ?? '',
      ]);
      const tasks: Array<Omit<ListedTask, 'shard'>> = [];
      for (let i = 0, at = 3; i < num(reply, 2); i++, at += 9) {
        const [id, partition, dueAt, deliveries, publishedAt, payload, when, extra, priority] = reply.slice(
          at,
          at + 9,
        );
        tasks.push({
          id: String(id),
          partition: String(partition),
          dueAt: Number(dueAt),
          deliveries: Number(deliveries),
          publishedAt: Number(publishedAt),
          payload: String(payload),
          at: Number(when),
          priority: Number(priority),
          ...(state === 'leased' ? { token: String(extra) } : {}),
          ...(state === 'dead' ? { reason: String(extra) } : {}),
        });
      }
      return { nowMs: num(reply, 0), next: String(reply[1] ?? ''), tasks };
    },
    async verify(keys, partitionConcurrency, maxReport) {
      const reply = await run('verify', keys, [partitionConcurrency, maxReport]);
      return { tasks: Number(reply[0]), violations: reply.slice(1).map(String) };
    },
  };
}
