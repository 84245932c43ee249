/**
 * Leasing: one lease call as waves of pipelined lease scripts over the shards the view plans, the
 * cap slots taken before each wave and bound after it, and the reclaim of expired leases. Kept
 * apart from the façade because it is the one hot path with state of its own (view, wakes, caps).
 */
import type { Logger } from '@requester/shared/log';
import type { ClientCaps } from './cap/index.ts';
import { clientOfPartition } from './keys.ts';
import { clientLabel, queueMetrics } from './metrics.ts';
import type { QueueScripts } from './scripts.ts';
import type { ShardView, Wave } from './shards.ts';
import type { CapSlot, LeasedTask, LeaseResult, ReclaimResult } from './types.ts';
import type { Wakes } from './wakes.ts';

/**
 * A shard whose only ready work belongs to clients at their caps is looked at again after this
 * long (a slot freed elsewhere is not announced: the holder does not know where the client waits).
 */
const CAP_RETRY_MS = 100;
/** Most further visits of a wave's shards for capped clients skipped without slots (see leaseWaveWithCaps). */
const CAP_VISITS = 3;

/** What leasing needs of its queue: its settings and the parts it shares with the façade. */
export interface LeaseContext {
  readonly name: string;
  readonly shards: number;
  readonly partitionConcurrency: number;
  readonly maxDeliveries: number;
  readonly housekeepingBatch: number;
  readonly refreshMs: number;
  readonly maxIdleMs: number;
  readonly shardsPerLease: number;
  readonly scripts: QueueScripts;
  keysOfShard(shard: number): string[];
  readonly view: ShardView;
  readonly wakes: Wakes;
  readonly caps: ClientCaps;
  readonly logger: Logger | undefined;
}

export class Leasing {
  private readonly q: LeaseContext;

  constructor(context: LeaseContext) {
    this.q = context;
  }

  /** Leases up to k tasks for leaseMs (`FairQueue.lease`, arguments checked). */
  async lease(k: number, leaseMs: number): Promise<LeaseResult> {
    const started = performance.now();
    await this.q.wakes.leaseStarts();
    if (Date.now() - this.q.view.refreshedAt >= this.q.refreshMs) await this.refreshView();
    const tasks: LeasedTask[] = [];
    await this.leaseWaveWithCaps(this.q.view.planWave(k, this.q.shardsPerLease), leaseMs, tasks, k);
    // The partitions met had fewer due tasks than the quantum assumed: more round trips, one task
    // per ready partition over as many shards as it takes. Another round only when the last one
    // met shards holding nothing but clients at their caps: those are now idle in the view
    // (leaseWave), so the next round looks further, and a lease does not come back empty while
    // another shard has work. Each such round idles a shard or more: at most as many as shards.
    for (let round = 0; tasks.length < k && round < this.q.shards; round++) {
      const wave = this.q.view.planWave(k - tasks.length, this.q.shards);
      if (wave.asks.size === 0) break;
      const idledCapped = await this.leaseWaveWithCaps(wave, leaseMs, tasks, k);
      if (!idledCapped) break;
    }
    queueMetrics.leaseLatency.observe({ queue: this.q.name }, (performance.now() - started) / 1000);
    if (tasks.length > 0) {
      queueMetrics.leased.inc({ queue: this.q.name }, tasks.length);
      this.observeWaits(tasks);
    }
    return { tasks, nextWakeMs: tasks.length > 0 ? 0 : this.q.view.idleFor(this.q.maxIdleMs) };
  }

  /** Each task's wait from due to lease, per client: what fair share is judged by. */
  private observeWaits(tasks: LeasedTask[]): void {
    // dueAt is on Redis's clock, Date.now() on ours: a skew of a few ms, never a negative wait.
    const now = Date.now();
    // One label set per client of the batch, not per task: a drain's lease brings hundreds of
    // tasks of a few clients, and a set per task would be garbage on the hot path.
    const labels = new Map<string, { queue: string; client: string }>();
    const priorities = new Map<number, { queue: string; priority: string }>();
    for (const task of tasks) {
      const client = clientOfPartition(task.partition);
      let set = labels.get(client);
      if (!set) {
        set = { queue: this.q.name, client: client === '' ? '(none)' : clientLabel.of(client) };
        labels.set(client, set);
      }
      const wait = Math.max(0, now - task.dueAt) / 1000;
      queueMetrics.clientWait.observe(set, wait);
      const priority = task.priority ?? 0;
      let prioritySet = priorities.get(priority);
      if (!prioritySet) {
        prioritySet = { queue: this.q.name, priority: String(priority) };
        priorities.set(priority, prioritySet);
      }
      queueMetrics.priorityWait.observe(prioritySet, wait);
    }
  }

  /** Takes back every expired lease on every shard (`FairQueue.reclaim`). */
  async reclaim(): Promise<ReclaimResult> {
    const total = { reclaimed: 0, deadLettered: 0 };
    let shards = Array.from({ length: this.q.shards }, (_, s) => s);
    while (shards.length > 0) {
      const replies = await Promise.all(
        shards.map((shard) =>
          this.q.scripts.reclaim(this.q.keysOfShard(shard), {
            partitionConcurrency: this.q.partitionConcurrency,
            maxDeliveries: this.q.maxDeliveries,
            housekeepingBatch: this.q.housekeepingBatch,
          }),
        ),
      );
      const again: number[] = [];
      replies.forEach((reply, i) => {
        const shard = shards[i] as number;
        this.q.view.update(shard, reply.readyCount, reply.nextEvent);
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
    const slots = await this.q.caps.take(asks, quantum, leaseMs);
    const args = (shard: number, ask: number) => ({
      partitionConcurrency: this.q.partitionConcurrency,
      shard,
      ask,
      leaseMs,
      maxDeliveries: this.q.maxDeliveries,
      housekeepingBatch: this.q.housekeepingBatch,
      quantum,
      permits: new Map(
        [...(slots.get(shard) ?? [])].map(([client, { permits }]) => [client, permits.length]),
      ),
    });
    const shards = [...asks.keys()];
    const settled = await Promise.allSettled(
      shards.map((shard) =>
        this.q.scripts.lease(this.q.keysOfShard(shard), args(shard, asks.get(shard) ?? 1)),
      ),
    );
    let failure: unknown;
    let reclaimed = 0;
    let deadLettered = 0;
    const unused: CapSlot[] = [];
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
      this.q.view.update(shard, reply.readyCount, reply.nextEvent);
      reclaimed += reply.reclaimed;
      deadLettered += reply.deadLettered;
      into.push(...reply.tasks);
      const ask = asks.get(shard) ?? 1;
      const { skippedUnasked } = this.q.caps.afterLease(shard, reply, given, ask, unused);
      // Skipped without having been asked for slots: worth a second visit with slots, when the
      // call took fewer tasks than asked.
      if (skippedUnasked && reply.tasks.length < ask) metCaps.push(shard);
      if (reply.tasks.length === 0 && reply.wanting.length > 0 && !skippedUnasked) {
        // Its ready work is all of clients at their caps: not worth a visit per lease call.
        const inMs = reply.nextEvent >= 0 ? Math.min(reply.nextEvent, CAP_RETRY_MS) : CAP_RETRY_MS;
        this.q.view.update(shard, 0, inMs);
        idledCapped = true;
      }
    });
    this.countReclaimed(reclaimed, deadLettered);
    // Not awaited (a round trip less per lease): the ZREMs are sent now, so every later command on
    // this connection sees them, and a slot given back late only keeps the client below its cap
    // a moment longer.
    if (unused.length > 0) {
      this.q.caps
        .release(unused)
        .catch((err: unknown) =>
          this.q.logger?.warn({ err, queue: this.q.name }, 'giving back unused cap slots failed'),
        );
    }
    if (failure !== undefined) {
      // Tasks leased on the other shards are handed out anyway; the failed shard is retried later.
      if (into.length === 0) throw failure;
      this.q.logger?.warn({ err: failure, queue: this.q.name }, 'lease failed on a shard');
    }
    return { metCaps, idledCapped };
  }

  private countReclaimed(reclaimed: number, deadLettered: number): void {
    if (reclaimed > 0) queueMetrics.reclaimed.inc({ queue: this.q.name }, reclaimed);
    if (deadLettered > 0) {
      queueMetrics.deadLettered.inc({ queue: this.q.name, cause: 'max_deliveries' }, deadLettered);
    }
  }

  /** Re-reads the state of every shard (one small read-only script per shard, pipelined). */
  private async refreshView(): Promise<void> {
    const at = Date.now();
    const replies = await Promise.all(
      Array.from({ length: this.q.shards }, (_, shard) => this.q.scripts.peek(this.q.keysOfShard(shard))),
    );
    replies.forEach(({ readyCount, nextEvent }, shard) => {
      this.q.view.update(shard, readyCount, nextEvent, at);
    });
    this.q.view.refreshedAt = at;
  }
}
