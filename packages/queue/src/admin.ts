/**
 * The operator's side of the queue (`QueueAdmin`): depth and per-client views, listing, dead
 * letters, purge, verify. Apart from the façade because none of it is on a worker's path: each
 * operation walks the shards a few at a time and may take seconds.
 */
import { queueMetrics } from './metrics.ts';
import type { FairQueue } from './queue.ts';
import type {
  ClientInfo,
  DeadTask,
  ListedTask,
  PartitionView,
  Progress,
  QueueInfo,
  TaskListFilter,
  TaskListPage,
  TaskListState,
} from './types.ts';

/** Clients named in the per-client metrics; the rest are summed as `other` (bounded labels). */
export const CLIENT_METRICS_TOP = 20;

/** Most members a listTasks script examines per call, and most calls per page. */
const LIST_BUDGET = 1_000;
const LIST_CALLS_PER_PAGE = 32;

const CONCURRENT_SHARDS = 16;
const BATCH = 500;

/**
 * Operator view and maintenance of a FairQueue (what `requester queue info|purge|retry|dlq`
 * runs). Every operation visits the shards a few at a time and reports progress per shard.
 */
export class QueueAdmin {
  private readonly queue: FairQueue;

  constructor(queue: FairQueue) {
    this.queue = queue;
  }

  /**
   * Depth per shard and in total; also sets the `queue_depth`, `queue_partitions` and
   * `queue_oldest_task_age_seconds` gauges. O(shards + partitions in flight), no task scan.
   */
  async info(options: { onProgress?: Progress } = {}): Promise<QueueInfo> {
    let redisNow = 0;
    const shards = await this.eachShard(options.onProgress, async (shard) => {
      const { nowMs, ...info } = await this.queue.scripts.info(
        this.keys(shard),
        this.queue.partitionConcurrency,
      );
      redisNow = Math.max(redisNow, nowMs);
      return { shard, ...info };
    });
    const totals = {
      pending: 0,
      inFlight: 0,
      dead: 0,
      readyPartitions: 0,
      waitingPartitions: 0,
      blockedPartitions: 0,
      dedupIds: 0,
    };
    let oldest: number | null = null;
    for (const s of shards) {
      for (const key of Object.keys(totals) as Array<keyof typeof totals>) totals[key] += s[key];
      if (s.oldestPublishedAt !== null) oldest = Math.min(oldest ?? s.oldestPublishedAt, s.oldestPublishedAt);
    }
    const oldestTaskAgeMs = oldest === null ? null : Math.max(0, redisNow - oldest);
    setQueueGauges(this.queue.name, totals, oldestTaskAgeMs);
    return { shards, totals, oldestTaskAgeMs };
  }

  /**
   * The clients with pending tasks or a cap, largest backlog first: pending tasks, ready partitions,
   * weight, cap and tasks in flight (capped clients only), and the oldest ready task's age. Also
   * sets the per-client gauges (see sampleClients). Counting a client's ready partitions reads
   * every shard's `ready` (its partitions are interleaved there by their fair-share tags, with no
   * line of their own): O(shards · (clients + ready partitions)), for an operator's one-off look
   * (`queue info --by-client`, the admin API). `readyPartitions: false` reads the fronts only, as
   * the sampler does (readyPartitions null): what a view refreshed every few seconds can afford.
   */
  async clients(options: { onProgress?: Progress; readyPartitions?: boolean } = {}): Promise<ClientInfo[]> {
    const reading = options.readyPartitions === false ? 'fronts' : 'counted';
    const { views, redisNow } = await this.clientViews(reading, options.onProgress);
    const [weights, caps] = await Promise.all([this.queue.clientWeights(), this.queue.clientCaps()]);
    for (const client of caps.keys()) {
      if (!views.has(client))
        views.set(client, { pending: 0, readyPartitions: reading === 'counted' ? 0 : null, oldest: null });
    }
    const inFlight = new Map(
      await Promise.all(
        [...caps.keys()].map(async (client) => [client, await this.queue.clientInFlight(client)] as const),
      ),
    );
    const clients = [...views]
      .map(([client, c]) => ({
        client,
        pending: c.pending,
        readyPartitions: c.readyPartitions,
        weight: weights.get(client) ?? 1,
        maxInFlight: caps.get(client) ?? null,
        inFlight: inFlight.get(client) ?? null,
        oldestReadyAgeMs: c.oldest === null ? null : Math.max(0, redisNow - c.oldest),
      }))
      .sort(byBacklog);
    setClientGauges(this.queue.name, clients);
    return clients;
  }

  /**
   * The per-client gauges (`queue_client_depth`, `queue_client_oldest_ready_age_seconds`) for the
   * CLIENT_METRICS_TOP largest backlogs, the rest as `other`: what the routers sample. Reads each
   * shard's clients and the front of its `ready` only (clients.lua, fronts): O(shards · (clients
   * + their weights)), whatever the backlog.
   */
  async sampleClients(): Promise<void> {
    const { views, redisNow } = await this.clientViews('fronts');
    const clients = [...views]
      .map(([client, c]) => ({
        client,
        pending: c.pending,
        oldestReadyAgeMs: c.oldest === null ? null : Math.max(0, redisNow - c.oldest),
      }))
      .sort(byBacklog);
    setClientGauges(this.queue.name, clients);
  }

  /** Every shard's clients, summed per client. */
  private async clientViews(reading: 'counted' | 'fronts', onProgress?: Progress) {
    let redisNow = 0;
    const perShard = await this.eachShard(onProgress, async (shard) => {
      const { nowMs, clients } = await this.queue.scripts.clients(this.keys(shard), reading);
      redisNow = Math.max(redisNow, nowMs);
      return clients;
    });
    const counted = reading === 'counted' ? 0 : null;
    const views = new Map<
      string,
      { pending: number; readyPartitions: number | null; oldest: number | null }
    >();
    for (const view of perShard.flat()) {
      const seen = views.get(view.client) ?? { pending: 0, readyPartitions: counted, oldest: null };
      seen.pending += view.pending;
      if (seen.readyPartitions !== null) seen.readyPartitions += view.readyPartitions ?? 0;
      if (view.oldestReadyPublishedAt !== null)
        seen.oldest = Math.min(seen.oldest ?? view.oldestReadyPublishedAt, view.oldestReadyPublishedAt);
      views.set(view.client, seen);
    }
    return { views, redisNow };
  }

  /**
   * Deletes the whole queue (every key of every shard, dedup window included; only the sequence
   * counters stay, so that lease tokens never repeat), or with `deadOnly` only the dead letters
   * (their ids stay refused for the dedup window). Returns tasks removed.
   */
  async purge(options: { deadOnly?: boolean; onProgress?: Progress } = {}): Promise<{ removed: number }> {
    const removed = await this.eachShard(options.onProgress, async (shard) => {
      const keys = this.keys(shard);
      if (!options.deadOnly) return (await this.queue.scripts.purge(keys, 'all', 0)).removed;
      let count = 0;
      for (;;) {
        const { removed, remaining } = await this.queue.scripts.purge(keys, 'dead', BATCH);
        count += removed;
        if (!remaining) return count;
      }
    });
    return { removed: removed.reduce((a, b) => a + b, 0) };
  }

  /**
   * Removes every key of the queue, its sequence counters included: for a queue that is gone for
   * good (tests, benchmarks), with no worker left holding a lease token.
   */
  async destroy(options: { onProgress?: Progress } = {}): Promise<{ removed: number }> {
    const removed = await this.eachShard(
      options.onProgress,
      async (shard) => (await this.queue.scripts.purge(this.keys(shard), 'destroy', 0)).removed,
    );
    return { removed: removed.reduce((a, b) => a + b, 0) };
  }

  /**
   * Puts dead letters back as new arrivals in their partitions: all of them, or the given ids
   * (ids that are not dead are ignored). Returns how many were retried.
   */
  async retryDead(
    ids: readonly string[] | 'all',
    options: { onProgress?: Progress } = {},
  ): Promise<{ retried: number }> {
    const limit = this.queue.partitionConcurrency;
    const retried = await this.eachShard(options.onProgress, async (shard) => {
      const keys = this.keys(shard);
      let count = 0;
      if (ids !== 'all') {
        for (let at = 0; at < ids.length; at += BATCH) {
          count += await this.queue.scripts.retryDeadIds(keys, limit, ids.slice(at, at + BATCH));
        }
        return count;
      }
      for (;;) {
        const { retried, remaining } = await this.queue.scripts.retryDeadAll(keys, limit, BATCH);
        count += retried;
        if (!remaining || !retried) return count;
      }
    });
    return { retried: retried.reduce((a, b) => a + b, 0) };
  }

  /**
   * A bounded sample of the partitions, at most `limit` of each kind per shard (those waiting
   * longest in the round-robin, those waking last, those with tasks in flight): O(shards · limit),
   * no scan of the tasks, so it is safe on a busy queue. Not every partition: the heavy and the
   * held-back ones that a look at the queue needs. Heaviest (most pending) first.
   */
  async partitions(limit = 20): Promise<{ nowMs: number; partitions: PartitionView[] }> {
    let nowMs = 0;
    const perShard = await this.eachShard(undefined, async (shard) => {
      const reply = await this.queue.scripts.partitions(
        this.keys(shard),
        this.queue.partitionConcurrency,
        limit,
      );
      nowMs = Math.max(nowMs, reply.nowMs);
      return reply.partitions.map((view) => ({ ...view, shard }));
    });
    return { nowMs, partitions: perShard.flat().sort((a, b) => b.pending - a.pending) };
  }

  /** The most recent dead letters over all shards, newest first. */
  async listDead(limit = 100): Promise<DeadTask[]> {
    const perShard = await this.eachShard(undefined, async (shard) => {
      const tasks = await this.queue.scripts.listDead(this.keys(shard), limit);
      return tasks.map((task) => ({ ...task, shard }));
    });
    return perShard
      .flat()
      .sort((a, b) => b.deadAt - a.deadAt)
      .slice(0, limit);
  }

  /**
   * One page of the tasks in a state, filtered: shard by shard, each shard's tasks in the order of
   * the set its state lives in (see commands/listTasks.lua). The cursor is the shard and the last
   * member examined, so a page follows the previous one whatever moved in between (a task that
   * changed state meanwhile is where it is now, or was seen already). Bounded per call: each script
   * examines at most LIST_BUDGET members, a page makes at most LIST_CALLS_PER_PAGE calls, and holds
   * at most `limit` tasks. A selective filter may give a short (even empty) page with a cursor:
   * the list is done only when `next` is null.
   */
  async listTasks(
    state: TaskListState,
    filter: TaskListFilter,
    limit: number,
    cursor?: string,
  ): Promise<TaskListPage> {
    let { shard, position } = cursor
      ? decodeListCursor(cursor, this.queue.shards)
      : { shard: 0, position: '' };
    const tasks: ListedTask[] = [];
    let nowMs = 0;
    for (
      let calls = 0;
      calls < LIST_CALLS_PER_PAGE && shard < this.queue.shards && tasks.length < limit;
      calls++
    ) {
      const step = await this.queue.scripts.listTasks(this.keys(shard), {
        state,
        position,
        limit: limit - tasks.length,
        budget: LIST_BUDGET,
        filter,
      });
      nowMs = Math.max(nowMs, step.nowMs);
      tasks.push(...step.tasks.map((task) => ({ ...task, shard })));
      if (step.next === '') {
        shard++;
        position = '';
      } else position = step.next;
    }
    const next = shard < this.queue.shards ? encodeListCursor(shard, position) : null;
    return { tasks, next, nowMs };
  }

  /**
   * Full consistency check (O(tasks): for tests and troubleshooting, not for a busy production
   * queue). Returns the violations found, empty when the queue is consistent.
   */
  async verify(options: { onProgress?: Progress; maxReport?: number } = {}): Promise<{
    tasks: number;
    violations: string[];
  }> {
    const perShard = await this.eachShard(options.onProgress, async (shard) => {
      const { tasks, violations } = await this.queue.scripts.verify(
        this.keys(shard),
        this.queue.partitionConcurrency,
        options.maxReport ?? 20,
      );
      return { tasks, violations: violations.map((v) => `shard ${shard}: ${v}`) };
    });
    return {
      tasks: perShard.reduce((a, s) => a + s.tasks, 0),
      violations: perShard.flatMap((s) => s.violations),
    };
  }

  private keys(shard: number): string[] {
    return this.queue.keysOfShard(shard);
  }

  /** Runs fn for every shard, CONCURRENT_SHARDS at a time, results in shard order. */
  private async eachShard<T>(
    onProgress: Progress | undefined,
    fn: (shard: number) => Promise<T>,
  ): Promise<T[]> {
    const total = this.queue.shards;
    const results: T[] = new Array(total);
    let next = 0;
    let done = 0;
    const worker = async () => {
      while (next < total) {
        const shard = next++;
        results[shard] = await fn(shard);
        onProgress?.(++done, total);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENT_SHARDS, total) }, worker));
    return results;
  }
}

/** A list cursor: the shard and the last member examined there, opaque to callers. */
function encodeListCursor(shard: number, position: string): string {
  return Buffer.from(JSON.stringify([shard, position])).toString('base64url');
}

function decodeListCursor(cursor: string, shards: number): { shard: number; position: string } {
  try {
    const [shard, position] = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown[];
    if (
      Number.isInteger(shard) &&
      (shard as number) >= 0 &&
      (shard as number) <= shards &&
      typeof position === 'string'
    )
      return { shard: shard as number, position };
  } catch {
    // below
  }
  throw new RangeError(`not a cursor of this list: ${JSON.stringify(cursor.slice(0, 80))}`);
}

/** Largest backlog first, then by name. */
function byBacklog(a: { client: string; pending: number }, b: { client: string; pending: number }): number {
  return b.pending - a.pending || a.client.localeCompare(b.client);
}

/** Top CLIENT_METRICS_TOP clients by backlog by name, the others summed (depth) or maxed (age) as `other`. */
function setClientGauges(
  queue: string,
  clients: ReadonlyArray<Pick<ClientInfo, 'client' | 'pending' | 'oldestReadyAgeMs'>>,
): void {
  const { clientDepth, clientOldestAge } = queueMetrics;
  // Clients that left the top (or the queue) must not keep their last value.
  clientDepth.reset();
  clientOldestAge.reset();
  let otherDepth = 0;
  let otherAge = 0;
  clients.forEach((c, rank) => {
    const ageSeconds = (c.oldestReadyAgeMs ?? 0) / 1000;
    if (rank < CLIENT_METRICS_TOP) {
      const client = c.client === '' ? '(none)' : c.client;
      clientDepth.set({ queue, client }, c.pending);
      clientOldestAge.set({ queue, client }, ageSeconds);
    } else {
      otherDepth += c.pending;
      otherAge = Math.max(otherAge, ageSeconds);
    }
  });
  clientDepth.set({ queue, client: 'other' }, otherDepth);
  clientOldestAge.set({ queue, client: 'other' }, otherAge);
}

function setQueueGauges(queue: string, totals: QueueInfo['totals'], oldestTaskAgeMs: number | null): void {
  const { depth, partitions, oldestAge } = queueMetrics;
  depth.set({ queue, state: 'pending' }, totals.pending);
  depth.set({ queue, state: 'leased' }, totals.inFlight);
  depth.set({ queue, state: 'dead' }, totals.dead);
  partitions.set({ queue, state: 'ready' }, totals.readyPartitions);
  partitions.set({ queue, state: 'waiting' }, totals.waitingPartitions);
  partitions.set({ queue, state: 'blocked' }, totals.blockedPartitions);
  oldestAge.set({ queue }, (oldestTaskAgeMs ?? 0) / 1000);
}
