/**
 * The fair queue's façade, `FairQueue`: the one class callers hold. It checks arguments, spreads
 * each call over the shards it concerns, and hands the work to the parts beside it (`lease.ts`,
 * `shards.ts`, `wakes.ts`, `cap/`, `weights.ts`), which share its settings and its view of the
 * shards; the Lua scripts do the rest (`scripts.ts`, `commands/`).
 */
import { RequesterError } from '@requester/shared/errors';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import { ClientCaps } from './cap/index.ts';
import { parseToken, shardKey, shardKeys, shardOfPartition } from './keys.ts';
import { Leasing } from './lease.ts';
import { queueMetrics } from './metrics.ts';
import { confirmReplicas, type ReplicaConfirmation } from './replicas.ts';
import { loadQueueScripts, type QueueScripts, type TokenReply } from './scripts.ts';
import { ShardView } from './shards.ts';
import type {
  CapSlot,
  FairQueueOptions,
  LeaseResult,
  PublishResult,
  PublishTask,
  ReclaimResult,
  TokenResult,
} from './types.ts';
import { checkClient, checkedPayload, nonNegativeInt, positiveInt, validateTask } from './validation.ts';
import { clientJoinedWake, shardWake, Wakes } from './wakes.ts';
import { readClientWeights, writeClientWeight } from './weights.ts';

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The Redis fair queue (docs/architecture.md §6): N shards, each a Redis Cluster slot; partitions
 * with a due head take turns, weighted between clients; ordered partitions with one task in
 * flight; leases with tokens and reclaim; idempotent publish with a post-ack dedup window. Every
 * operation is batched per shard and pipelined over shards.
 */
export class FairQueue {
  readonly redis: RedisClient;
  readonly prefix: string;
  readonly name: string;
  readonly shards: number;
  readonly dedupWindowMs: number;
  readonly partitionConcurrency: number;
  readonly maxDeliveries: number;
  private readonly publishBatch: number;
  private readonly maxPayloadBytes: number;
  private readonly publishReplicas: ReplicaConfirmation;
  private readonly logger: Logger | undefined;
  /** The queue's scripts (for the admin module and tests); `keysOfShard` gives their keys. */
  readonly scripts: QueueScripts;
  private readonly keysOf: string[][];
  private readonly view: ShardView;
  private readonly wakes: Wakes;
  private readonly caps: ClientCaps;
  private readonly leasing: Leasing;

  constructor(options: FairQueueOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix ?? 'rq:';
    this.name = options.name ?? this.prefix;
    this.shards = positiveInt('shards', options.shards ?? 128);
    this.dedupWindowMs = nonNegativeInt('dedupWindowMs', options.dedupWindowMs ?? DAY_MS);
    this.partitionConcurrency = nonNegativeInt('partitionConcurrency', options.partitionConcurrency ?? 0);
    this.maxDeliveries = nonNegativeInt('maxDeliveries', options.maxDeliveries ?? 0);
    const housekeepingBatch = positiveInt('housekeepingBatch', options.housekeepingBatch ?? 256);
    this.publishBatch = positiveInt('publishBatch', options.publishBatch ?? 500);
    const refreshMs = nonNegativeInt('refreshMs', options.refreshMs ?? 1000);
    const maxIdleMs = nonNegativeInt('maxIdleMs', options.maxIdleMs ?? 1000);
    const shardsPerLease = positiveInt('shardsPerLease', options.shardsPerLease ?? 8);
    this.maxPayloadBytes = positiveInt('maxPayloadBytes', options.maxPayloadBytes ?? 64 * 1024);
    this.publishReplicas = {
      replicas: nonNegativeInt('publishReplicas.replicas', options.publishReplicas?.replicas ?? 0),
      timeoutMs: positiveInt('publishReplicas.timeoutMs', options.publishReplicas?.timeoutMs ?? 500),
    };
    this.logger = options.logger;
    this.scripts = loadQueueScripts(this.redis);
    this.caps = new ClientCaps({ redis: this.redis, prefix: this.prefix, shards: this.shards });
    this.keysOf = Array.from({ length: this.shards }, (_, shard) => shardKeys(this.prefix, shard));
    this.view = new ShardView(this.shards);
    this.wakes = new Wakes({
      redis: this.redis,
      prefix: this.prefix,
      enabled: options.notify ?? true,
      shards: this.shards,
      listener: this.view,
      name: this.name,
      logger: this.logger,
    });
    this.leasing = new Leasing({
      name: this.name,
      shards: this.shards,
      partitionConcurrency: this.partitionConcurrency,
      maxDeliveries: this.maxDeliveries,
      housekeepingBatch,
      refreshMs,
      maxIdleMs,
      shardsPerLease,
      scripts: this.scripts,
      keysOfShard: (shard) => this.keysOfShard(shard),
      view: this.view,
      wakes: this.wakes,
      caps: this.caps,
      logger: this.logger,
    });
  }

  /** The shard of a partition (stable across processes). */
  shardOf(partition: string): number {
    return shardOfPartition(partition, this.shards);
  }

  /** The keys of one shard, which every script takes. */
  keysOfShard(shard: number): string[] {
    const keys = this.keysOf[shard];
    if (!keys) throw new RequesterError('invalid_request', `no shard ${shard} (queue has ${this.shards})`);
    return keys;
  }

  /** Publishes tasks; one result per task, in order. Refuses ids pending, leased, dead or recently acked. */
  async publish(tasks: readonly PublishTask[]): Promise<PublishResult[]> {
    const byShard = new Map<number, number[]>();
    tasks.forEach((task, index) => {
      validateTask(task, this.maxPayloadBytes);
      const shard = this.shardOf(task.partition ?? task.id);
      const list = byShard.get(shard);
      if (list) list.push(index);
      else byShard.set(shard, [index]);
    });
    const results: PublishResult[] = new Array(tasks.length);
    const woke: string[] = [];
    const calls: Promise<void>[] = [];
    for (const [shard, indexes] of byShard) {
      for (let at = 0; at < indexes.length; at += this.publishBatch) {
        const chunk = indexes.slice(at, at + this.publishBatch);
        const published = chunk.map((index) => tasks[index] as PublishTask);
        calls.push(
          this.scripts
            .publish(
              this.keysOfShard(shard),
              this.partitionConcurrency,
              this.dedupWindowMs,
              published,
              this.wakes.forPublish(shard),
            )
            .then(({ readyCount, nextEvent, notify, clientJoined, queued }) => {
              this.view.update(shard, readyCount, nextEvent);
              if (notify) woke.push(shardWake(shard, readyCount > 0 ? 0 : nextEvent));
              // A client new to the shard's fair share has the next turn there: workers go there
              // first, or its task would wait for their cursors to come round (shards × k tasks).
              if (clientJoined) woke.push(clientJoinedWake(shard));
              chunk.forEach((index, i) => {
                results[index] = queued[i] ? 'queued' : 'duplicate';
              });
            }),
        );
      }
    }
    await Promise.all(calls);
    await confirmReplicas(
      this.redis,
      [...byShard.keys()].map((shard) => this.keysOfShard(shard)[0] as string),
      this.publishReplicas,
    );
    let queued = 0;
    for (const r of results) if (r === 'queued') queued++;
    queueMetrics.published.inc({ queue: this.name, result: 'queued' }, queued);
    if (tasks.length > queued) {
      queueMetrics.published.inc({ queue: this.name, result: 'duplicate' }, tasks.length - queued);
    }
    // The scripts announced their shards on Redis themselves (no round trip of its own); the
    // workers of this process hear it here.
    this.wakes.announceLocally(woke);
    return results;
  }

  /**
   * Leases up to k tasks for leaseMs, fairly across partitions (one task per partition per turn)
   * and across shards (a rotating cursor; one round trip for all shards visited, a second one only
   * when the first could not fill k).
   */
  async lease(k: number, leaseMs: number): Promise<LeaseResult> {
    positiveInt('k', k);
    positiveInt('leaseMs', leaseMs);
    return this.leasing.lease(k, leaseMs);
  }

  /**
   * A client's share of the leases relative to other clients' (1 to MAX_CLIENT_WEIGHT; 1 by
   * default): with every client saturating the queue, a client of weight 3 gets 3 leases for each
   * of a weight-1 client's. A client is the suffix of its partition names (`clientOfPartition`).
   */
  async setClientWeight(client: string, weight: number): Promise<void> {
    checkClient(client);
    await writeClientWeight(this, client, weight);
  }

  /** The clients with a weight other than 1 (read from shard 0; every shard holds the same). */
  clientWeights(): Promise<Map<string, number>> {
    return readClientWeights(this);
  }

  /**
   * A client's cap of tasks in flight across every executor (0: none); lowering it leaves the
   * tasks in flight alone: the client gets no more until it is below the new one.
   */
  async setClientMaxInFlight(client: string, cap: number): Promise<void> {
    checkClient(client);
    nonNegativeInt('max in flight', cap);
    await this.caps.setMaxInFlight(client, cap);
  }

  /** The clients with a cap of tasks in flight. */
  clientCaps(): Promise<Map<string, number>> {
    return this.caps.caps();
  }

  /** The cap slots a client holds now: its tasks in flight, counted only for a capped client. */
  clientInFlight(client: string): Promise<number> {
    return this.caps.inFlight(client);
  }

  /** The cap slot bound to a lease this instance handed out (a capped client's), if any. */
  capSlotOf(token: string): Readonly<CapSlot> | undefined {
    return this.caps.slotOf(token);
  }

  /** @deprecated Use `capSlotOf`. */
  capHoldOf(token: string): Readonly<CapSlot> | undefined {
    return this.capSlotOf(token);
  }

  /** Heartbeat: the lease now ends leaseMs from now. */
  async extend(token: string, leaseMs: number): Promise<TokenResult> {
    const [result] = await this.extendMany([{ token, leaseMs }]);
    return result as TokenResult;
  }

  async extendMany(leases: ReadonlyArray<{ token: string; leaseMs: number }>): Promise<TokenResult[]> {
    const checked = leases.map((l) => ({ token: l.token, leaseMs: positiveInt('leaseMs', l.leaseMs) }));
    return this.onTokens('extend', checked, (keys, mine) => this.scripts.extend(keys, mine));
  }

  /** Done: the task leaves the queue and its id stays refused for the dedup window. */
  async ack(token: string): Promise<TokenResult> {
    const [result] = await this.ackMany([token]);
    return result as TokenResult;
  }

  async ackMany(tokens: readonly string[]): Promise<TokenResult[]> {
    return this.onTokens(
      'ack',
      tokens.map((token) => ({ token })),
      (keys, mine) =>
        this.scripts.ack(
          keys,
          this.partitionConcurrency,
          this.dedupWindowMs,
          mine.map((i) => i.token),
        ),
    );
  }

  /**
   * Try again later. Ordered partition: the task stays at the head and the partition is blocked for
   * delayMs. Unordered: the task becomes due at now + delayMs.
   */
  async reject(token: string, delayMs: number, payload?: string): Promise<TokenResult> {
    const [result] = await this.rejectMany([
      { token, delayMs, ...(payload === undefined ? {} : { payload }) },
    ]);
    return result as TokenResult;
  }

  /** `payload`, when given, replaces the task's payload (e.g. a retry carrying its attempt count). */
  async rejectMany(
    items: ReadonlyArray<{ token: string; delayMs: number; payload?: string }>,
  ): Promise<TokenResult[]> {
    const checked = items.map((i) => ({
      token: i.token,
      delayMs: nonNegativeInt('delayMs', i.delayMs),
      payload: i.payload === undefined ? '' : checkedPayload(i.payload, this.maxPayloadBytes),
    }));
    return this.onTokens('reject', checked, (keys, mine) =>
      this.scripts.reject(keys, this.partitionConcurrency, mine),
    );
  }

  /** Give up on a task: it moves to the dead letters with the reason (see admin listDead/retryDead). */
  async deadLetter(token: string, reason: string): Promise<TokenResult> {
    const [result] = await this.deadLetterMany([{ token, reason }]);
    return result as TokenResult;
  }

  async deadLetterMany(items: ReadonlyArray<{ token: string; reason: string }>): Promise<TokenResult[]> {
    const results = await this.onTokens('deadLetter', items, (keys, mine) =>
      this.scripts.deadLetter(keys, this.partitionConcurrency, mine),
    );
    const dead = results.filter((r) => r === 'ok').length;
    if (dead > 0) queueMetrics.deadLettered.inc({ queue: this.name, cause: 'explicit' }, dead);
    return results;
  }

  /** Takes back every expired lease on every shard (lease() also does it as it goes). */
  reclaim(): Promise<ReclaimResult> {
    return this.leasing.reclaim();
  }

  /**
   * Tasks waiting to be leased in the whole queue, due or not (what a producer throttles on): one
   * ZCARD of each shard's `pending` set, auto-pipelined (and split by slot on a cluster).
   * O(shards) of O(1) commands — cheaper than QueueAdmin.info(), which also walks the partitions
   * in flight. Also sets the `queue_depth{state="pending"}` gauge.
   */
  async pendingDepth(): Promise<number> {
    const counts = await Promise.all(
      Array.from({ length: this.shards }, (_, shard) =>
        this.redis.zcard(shardKey(this.prefix, shard, 'pending')),
      ),
    );
    const pending = counts.reduce((sum, n) => sum + n, 0);
    queueMetrics.depth.set({ queue: this.name, state: 'pending' }, pending);
    return pending;
  }

  /**
   * Resolves after ms, or earlier when some process announces new work (pub/sub) — what an idle
   * worker does with `nextWakeMs`: true when woken by an announcement, false on timeout or abort.
   */
  waitForWork(ms: number, signal?: AbortSignal): Promise<boolean> {
    return this.wakes.waitForWork(ms, signal);
  }

  /** Stops listening to wake announcements (the caller owns and closes `redis`). */
  close(): Promise<void> {
    return this.wakes.close();
  }

  get wakeChannel(): string {
    return this.wakes.channel;
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * One script call per shard on the tokens of `items` (extend or a settlement), all pipelined;
   * results in the order of `items`.
   */
  private async onTokens<Item extends { token: string }>(
    op: 'extend' | 'ack' | 'reject' | 'deadLetter',
    items: readonly Item[],
    run: (keys: string[], items: Item[]) => Promise<TokenReply>,
  ): Promise<TokenResult[]> {
    const byShard = new Map<number, number[]>();
    items.forEach((item, index) => {
      const { shard } = parseToken(item.token);
      if (shard >= this.shards) {
        throw new RequesterError(
          'invalid_request',
          `token of shard ${shard}, queue has ${this.shards} shards`,
        );
      }
      const list = byShard.get(shard);
      if (list) list.push(index);
      else byShard.set(shard, [index]);
    });
    const results: TokenResult[] = new Array(items.length);
    const woke: string[] = [];
    await Promise.all(
      [...byShard].map(async ([shard, indexes]) => {
        const { ok, state } = await run(
          this.keysOfShard(shard),
          indexes.map((index) => items[index] as Item),
        );
        if (state) {
          this.view.update(shard, state.readyCount, state.nextEvent);
          if (state.notify) woke.push(shardWake(shard, 0));
          if (state.urgent) woke.push(clientJoinedWake(shard));
        }
        indexes.forEach((index, i) => {
          results[index] = ok[i] ? 'ok' : 'stale';
        });
      }),
    );
    // e.g. an ordered partition unblocked by this ack, on a shard other workers believe idle
    // (not awaited, as in publish)
    void this.wakes.announce(woke);
    await this.caps.afterTokens(op, items, results);
    const ok = results.filter((r) => r === 'ok').length;
    if (ok > 0) queueMetrics.settled.inc({ queue: this.name, op, result: 'ok' }, ok);
    if (ok < results.length) {
      queueMetrics.settled.inc({ queue: this.name, op, result: 'stale' }, results.length - ok);
    }
    return results;
  }
}
