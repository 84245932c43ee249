import { RequesterError } from '@requester/shared/errors';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import { ClientCaps } from './cap/index.ts';
import { clientOfPartition, parseToken, shardKey, shardKeys, shardOfPartition } from './keys.ts';
import { clientLabel, queueMetrics } from './metrics.ts';
import { loadQueueScripts, type QueueScripts, type Settled } from './scripts.ts';
import { ShardView, type Wave } from './shards.ts';
import type {
  CapHold,
  FairQueueOptions,
  LeasedTask,
  LeaseResult,
  PublishResult,
  PublishTask,
  ReclaimResult,
  SettleResult,
} from './types.ts';
import { checkClient, checkedPayload, nonNegativeInt, positiveInt, validateTask } from './validation.ts';
import { clientJoinedWake, shardWake, Wakes } from './wakes.ts';
import { readClientWeights, writeClientWeight } from './weights.ts';

const DAY_MS = 24 * 60 * 60 * 1000;
/**
 * A shard whose only ready work belongs to clients at their caps is looked at again after this
 * long (a slot freed elsewhere is not announced: the holder does not know where the client waits).
 */
const CAP_RETRY_MS = 100;
/** Most further visits of a wave's shards for capped clients skipped without slots (see leaseWaveWithCaps). */
const CAP_VISITS = 3;

/**
 * The Redis fair queue (docs/architecture.md §6): N shards, each a Redis Cluster slot; fair round-robin over
 * partitions with a due head; ordered partitions with one task in flight; leases with tokens and
 * reclaim; idempotent publish with a post-ack dedup window. Every operation is batched per shard
 * and pipelined over shards.
 */
export class FairQueue {
  readonly redis: RedisClient;
  readonly prefix: string;
  readonly name: string;
  readonly shards: number;
  readonly dedupWindowMs: number;
  readonly partitionConcurrency: number;
  readonly maxDeliveries: number;
  private readonly housekeepingBatch: number;
  private readonly publishBatch: number;
  private readonly refreshMs: number;
  private readonly maxIdleMs: number;
  private readonly shardsPerLease: number;
  private readonly maxPayloadBytes: number;
  private readonly logger: Logger | undefined;
  /** The queue's scripts (for the admin module and tests); `keysOfShard` gives their keys. */
  readonly scripts: QueueScripts;
  private readonly keysOf: string[][];
  private readonly view: ShardView;
  private readonly wakes: Wakes;
  private readonly caps: ClientCaps;

  constructor(options: FairQueueOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix ?? 'rq:';
    this.name = options.name ?? this.prefix;
    this.shards = positiveInt('shards', options.shards ?? 128);
    this.dedupWindowMs = nonNegativeInt('dedupWindowMs', options.dedupWindowMs ?? DAY_MS);
    this.partitionConcurrency = nonNegativeInt('partitionConcurrency', options.partitionConcurrency ?? 0);
    this.maxDeliveries = nonNegativeInt('maxDeliveries', options.maxDeliveries ?? 0);
    this.housekeepingBatch = positiveInt('housekeepingBatch', options.housekeepingBatch ?? 256);
    this.publishBatch = positiveInt('publishBatch', options.publishBatch ?? 500);
    this.refreshMs = nonNegativeInt('refreshMs', options.refreshMs ?? 1000);
    this.maxIdleMs = nonNegativeInt('maxIdleMs', options.maxIdleMs ?? 1000);
    this.shardsPerLease = positiveInt('shardsPerLease', options.shardsPerLease ?? 8);
    this.maxPayloadBytes = positiveInt('maxPayloadBytes', options.maxPayloadBytes ?? 64 * 1024);
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
    const started = performance.now();
    await this.wakes.leaseStarts();
    if (Date.now() - this.view.refreshedAt >= this.refreshMs) await this.refreshView();
    const tasks: LeasedTask[] = [];
    await this.leaseWaveWithCaps(this.view.planWave(k, this.shardsPerLease), leaseMs, tasks, k);
    // The partitions met had fewer due tasks than the quantum assumed: more round trips, one task
    // per ready partition over as many shards as it takes. Another round only when the last one
    // met shards holding nothing but clients at their caps: those are now idle in the view
    // (leaseWave), so the next round looks further, and a lease does not come back empty while
    // another shard has work. Each such round idles a shard or more: at most as many as shards.
    for (let round = 0; tasks.length < k && round < this.shards; round++) {
      const wave = this.view.planWave(k - tasks.length, this.shards);
      if (wave.asks.size === 0) break;
      const idledCapped = await this.leaseWaveWithCaps(wave, leaseMs, tasks, k);
      if (!idledCapped) break;
    }
    queueMetrics.leaseLatency.observe({ queue: this.name }, (performance.now() - started) / 1000);
    if (tasks.length > 0) {
      queueMetrics.leased.inc({ queue: this.name }, tasks.length);
      this.observeWaits(tasks);
    }
    return { tasks, nextWakeMs: tasks.length > 0 ? 0 : this.view.idleFor(this.maxIdleMs) };
  }

  /** Each task's wait from due to lease, per client: what fair share is judged by. */
  private observeWaits(tasks: LeasedTask[]): void {
    // dueAt is on Redis's clock, Date.now() on ours: a skew of a few ms, never a negative wait.
    const now = Date.now();
    // One label set per client of the batch: a drain's lease brings hundreds of tasks of a few
    // clients, and a label set per task was garbage the drain's collector paid for.
    const labels = new Map<string, { queue: string; client: string }>();
    for (const task of tasks) {
      const client = clientOfPartition(task.partition);
      let set = labels.get(client);
      if (!set) {
        set = { queue: this.name, client: client === '' ? '(none)' : clientLabel.of(client) };
        labels.set(client, set);
      }
      queueMetrics.clientWait.observe(set, Math.max(0, now - task.dueAt) / 1000);
    }
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

  /** The cap slot this instance holds for a lease it handed out (a capped client's), if any. */
  capHoldOf(token: string): Readonly<CapHold> | undefined {
    return this.caps.holdOf(token);
  }

  /** Heartbeat: the lease now ends leaseMs from now. */
  async extend(token: string, leaseMs: number): Promise<SettleResult> {
    const [result] = await this.extendMany([{ token, leaseMs }]);
    return result as SettleResult;
  }

  async extendMany(leases: ReadonlyArray<{ token: string; leaseMs: number }>): Promise<SettleResult[]> {
    const checked = leases.map((l) => ({ token: l.token, leaseMs: positiveInt('leaseMs', l.leaseMs) }));
    return this.settle('extend', checked, (keys, mine) => this.scripts.extend(keys, mine));
  }

  /** Done: the task leaves the queue and its id stays refused for the dedup window. */
  async ack(token: string): Promise<SettleResult> {
    const [result] = await this.ackMany([token]);
    return result as SettleResult;
  }

  async ackMany(tokens: readonly string[]): Promise<SettleResult[]> {
    return this.settle(
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
  async reject(token: string, delayMs: number, payload?: string): Promise<SettleResult> {
    const [result] = await this.rejectMany([
      { token, delayMs, ...(payload === undefined ? {} : { payload }) },
    ]);
    return result as SettleResult;
  }

  /** `payload`, when given, replaces the task's payload (e.g. a retry carrying its attempt count). */
  async rejectMany(
    items: ReadonlyArray<{ token: string; delayMs: number; payload?: string }>,
  ): Promise<SettleResult[]> {
    const checked = items.map((i) => ({
      token: i.token,
      delayMs: nonNegativeInt('delayMs', i.delayMs),
      payload: i.payload === undefined ? '' : checkedPayload(i.payload, this.maxPayloadBytes),
    }));
    return this.settle('reject', checked, (keys, mine) =>
      this.scripts.reject(keys, this.partitionConcurrency, mine),
    );
  }

  /** Give up on a task: it moves to the dead letters with the reason (see admin listDead/retryDead). */
  async deadLetter(token: string, reason: string): Promise<SettleResult> {
    const [result] = await this.deadLetterMany([{ token, reason }]);
    return result as SettleResult;
  }

  async deadLetterMany(items: ReadonlyArray<{ token: string; reason: string }>): Promise<SettleResult[]> {
    const results = await this.settle('deadLetter', items, (keys, mine) =>
      this.scripts.deadLetter(keys, this.partitionConcurrency, mine),
    );
    const dead = results.filter((r) => r === 'ok').length;
    if (dead > 0) queueMetrics.deadLettered.inc({ queue: this.name, cause: 'explicit' }, dead);
    return results;
  }

  /** Takes back every expired lease on every shard (lease() also does it as it goes). */
  async reclaim(): Promise<ReclaimResult> {
    const total = { reclaimed: 0, deadLettered: 0 };
    let shards = Array.from({ length: this.shards }, (_, s) => s);
    while (shards.length > 0) {
      const replies = await Promise.all(
        shards.map((shard) =>
          this.scripts.reclaim(this.keysOfShard(shard), {
            partitionConcurrency: this.partitionConcurrency,
            maxDeliveries: this.maxDeliveries,
            housekeepingBatch: this.housekeepingBatch,
          }),
        ),
      );
      const again: number[] = [];
      replies.forEach((reply, i) => {
        const shard = shards[i] as number;
        this.view.update(shard, reply.readyCount, reply.nextEvent);
        total.reclaimed += reply.reclaimed;
        total.deadLettered += reply.deadLettered;
        if (reply.more) again.push(shard);
      });
      shards = again;
    }
    this.countReclaimed(total.reclaimed, total.deadLettered);
    return total;
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

  /** Stops the wake-up subscription (the caller owns and closes `redis`). */
  close(): Promise<void> {
    return this.wakes.close();
  }

  get wakeChannel(): string {
    return this.wakes.channel;
  }

  // ---------------------------------------------------------------------------------------------

  /** One settle script call per shard, all pipelined; results in the order of `items`. */
  private async settle<Item extends { token: string }>(
    op: 'extend' | 'ack' | 'reject' | 'deadLetter',
    items: readonly Item[],
    run: (keys: string[], items: Item[]) => Promise<Settled>,
  ): Promise<SettleResult[]> {
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
    const results: SettleResult[] = new Array(items.length);
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
        }
        indexes.forEach((index, i) => {
          results[index] = ok[i] ? 'ok' : 'stale';
        });
      }),
    );
    // e.g. an ordered partition unblocked by this ack, on a shard other workers believe idle
    // (not awaited, as in publish)
    void this.wakes.announce(woke);
    await this.caps.settle(op, items, results);
    const ok = results.filter((r) => r === 'ok').length;
    if (ok > 0) queueMetrics.settled.inc({ queue: this.name, op, result: 'ok' }, ok);
    if (ok < results.length) {
      queueMetrics.settled.inc({ queue: this.name, op, result: 'stale' }, results.length - ok);
    }
    return results;
  }

  /**
   * A wave, and when it skipped capped clients it had not asked slots for (this process did not
   * know they waited there, or the ask was covered by clients before them that turned out to be at
   * their caps), more visits of those shards with their cap slots (never more than k tasks in all,
   * at most CAP_VISITS: each moves the clients found at their caps behind the others). True when a
   * shard gave nothing for its clients being at their caps (idle in the view for a while since).
   */
  private async leaseWaveWithCaps(
    wave: Wave,
    leaseMs: number,
    into: LeasedTask[],
    k: number,
  ): Promise<boolean> {
    let visit = await this.leaseWave(wave, leaseMs, into);
    let idledCapped = visit.idledCapped;
    for (let again = 0; again < CAP_VISITS && visit.metCaps.length > 0; again++) {
      let remaining = k - into.length;
      const asks = new Map<number, number>();
      for (const shard of visit.metCaps) {
        if (remaining <= 0) break;
        const ask = Math.min(remaining, wave.asks.get(shard) ?? 1);
        asks.set(shard, ask);
        remaining -= ask;
      }
      if (asks.size === 0) break;
      visit = await this.leaseWave({ asks, quantum: wave.quantum }, leaseMs, into);
      idledCapped ||= visit.idledCapped;
    }
    return idledCapped;
  }

  /**
   * One lease call per shard of the wave, pipelined. `idledCapped`: a shard gave nothing for its
   * clients being at their caps. `metCaps`: the shards where capped clients this
   * process had not known of were skipped for want of cap slots (worth a second visit with slots).
   */
  private async leaseWave(
    { asks, quantum }: Wave,
    leaseMs: number,
    into: LeasedTask[],
  ): Promise<{ metCaps: number[]; idledCapped: boolean }> {
    if (asks.size === 0) return { metCaps: [], idledCapped: false };
    const slots = await this.caps.take(asks, quantum, leaseMs);
    const args = (shard: number, ask: number) => ({
      partitionConcurrency: this.partitionConcurrency,
      shard,
      ask,
      leaseMs,
      maxDeliveries: this.maxDeliveries,
      housekeepingBatch: this.housekeepingBatch,
      quantum,
      permits: new Map(
        [...(slots.get(shard) ?? [])].map(([client, { permits }]) => [client, permits.length]),
      ),
    });
    const shards = [...asks.keys()];
    const settled = await Promise.allSettled(
      shards.map((shard) => this.scripts.lease(this.keysOfShard(shard), args(shard, asks.get(shard) ?? 1))),
    );
    let failure: unknown;
    let reclaimed = 0;
    let deadLettered = 0;
    const unused: CapHold[] = [];
    const metCaps: number[] = [];
    let idledCapped = false;
    settled.forEach((outcome, i) => {
      const shard = shards[i] as number;
      const given = slots.get(shard);
      // A failed call keeps its slots until they expire: it may have leased before its reply was lost.
      if (outcome.status === 'rejected') {
        failure ??= outcome.reason;
        return;
      }
      const reply = outcome.value;
      this.view.update(shard, reply.readyCount, reply.nextEvent);
      reclaimed += reply.reclaimed;
      deadLettered += reply.deadLettered;
      into.push(...reply.tasks);
      const ask = asks.get(shard) ?? 1;
      const { skippedUnasked } = this.caps.afterLease(shard, reply, given, ask, unused);
      // Skipped without having been asked for slots: worth a second visit with slots, when the
      // call took fewer tasks than asked.
      if (skippedUnasked && reply.tasks.length < ask) metCaps.push(shard);
      if (reply.tasks.length === 0 && reply.wanting.length > 0 && !skippedUnasked) {
        // Its ready work is all of clients at their caps: not worth a visit per lease call.
        const inMs = reply.nextEvent >= 0 ? Math.min(reply.nextEvent, CAP_RETRY_MS) : CAP_RETRY_MS;
        this.view.update(shard, 0, inMs);
        idledCapped = true;
      }
    });
    this.countReclaimed(reclaimed, deadLettered);
    // Not awaited (a round trip less per lease): the ZREMs are sent now, so every later command on
    // this connection sees them, and a slot given back late only keeps the client below its cap
    // a moment longer.
    if (unused.length > 0) {
      this.caps
        .release(unused)
        .catch((err: unknown) =>
          this.logger?.warn({ err, queue: this.name }, 'giving back unused cap slots failed'),
        );
    }
    if (failure !== undefined) {
      // Tasks leased on the other shards are handed out anyway; the failed shard is retried later.
      if (into.length === 0) throw failure;
      this.logger?.warn({ err: failure, queue: this.name }, 'lease failed on a shard');
    }
    return { metCaps, idledCapped };
  }

  private countReclaimed(reclaimed: number, deadLettered: number): void {
    if (reclaimed > 0) queueMetrics.reclaimed.inc({ queue: this.name }, reclaimed);
    if (deadLettered > 0) {
      queueMetrics.deadLettered.inc({ queue: this.name, cause: 'max_deliveries' }, deadLettered);
    }
  }

  /** Re-reads the state of every shard (one small read-only script per shard, pipelined). */
  private async refreshView(): Promise<void> {
    const at = Date.now();
    const replies = await Promise.all(
      Array.from({ length: this.shards }, (_, shard) => this.scripts.peek(this.keysOfShard(shard))),
    );
    replies.forEach(({ readyCount, nextEvent }, shard) => {
      this.view.update(shard, readyCount, nextEvent, at);
    });
    this.view.refreshedAt = at;
  }
}
