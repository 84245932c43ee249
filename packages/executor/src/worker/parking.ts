import { setTimeout as sleep } from 'node:timers/promises';
import { clientOfPartition } from '@requester/queue';
import type { Journal } from '@requester/shared/journal';
import type { FetchOutcome } from '@requester/shared/kafka';
import { encodeQueuedTask, type QueuedTask } from '@requester/shared/task';
import type { Granted } from '../bulkhead/index.ts';
import { executorMetrics as metrics } from '../metrics.ts';
import { HELD_PER_WORKER, type LeaseBudget } from './budget.ts';
import { addWait, PARK_MAX_MS, type Parking, parks, waitsForSlot } from './decide.ts';
import type { LeaseHeartbeat } from './heartbeat.ts';
import type { Outcomes } from './outcomes.ts';
import type { Policies } from './policies.ts';
import type { WorkerPool } from './pool.ts';
import { safeOrigin } from './prechecks.ts';
import type { Job, Settlement } from './settlement.ts';
import { decodeTask } from './source.ts';
import type { TaskRunner } from './task.ts';

/**
 * The parking budget without configuration (the defaults of EXECUTOR_PARKED_TASKS and
 * EXECUTOR_PARKED_BYTES): enough tasks for a few seconds of a fast pace, and a bound on the
 * memory of the records they hold.
 */
export const DEFAULT_PARKING: Parking = { tasks: 1_000, bytes: 32 * 1024 * 1024 };

/** What parking needs: the executor's parts, and how it tells the loop a worker is free. */
export interface ParkingParts {
  budget: LeaseBudget;
  pool: WorkerPool;
  runner: TaskRunner;
  heartbeat: LeaseHeartbeat;
  policies: Policies;
  endings: Outcomes;
  journal: Journal | undefined;
  /** The executor's stop: a parked task goes back to the queue with the rest of its wait. */
  stopping: AbortSignal;
  /** EXECUTOR_PARKED_TASKS, EXECUTOR_PARKED_BYTES. */
  parking: Parking;
  /** A task going to park freed its worker (LeaseBudget.freed, and a wake of the loop). */
  freed(): void;
}

/**
 * Tasks waiting in this process, holding their lease but no worker and no lease budget (see
 * LeaseBudget.size): for a pacing slot, a retry, a busy breaker (park) or a bulkhead slot
 * (parkForSlot). Their own budget (`parking`: tasks, and bytes of the records they hold) bounds
 * their memory; what does not fit goes back to the queue.
 */
export class ParkingLot {
  private readonly parts: ParkingParts;
  private readonly parked: Parking = { tasks: 0, bytes: 0 };
  /**
   * Tasks parked for a slot, by origin and client: at most HELD_PER_WORKER × `maxWorkers` each.
   * More would only wait longer (the slots come at the origin's pace) while the loop leases more
   * of them for nothing: a backlog's tasks beyond it go back to the queue, another client's still
   * park (and, in the slot line's order, are handed the next slot).
   */
  private readonly slotWaits = new Map<string, number>();
  /** The parked tasks by what they wait for (the gauge's `reason`). */
  private readonly parkedBy = new Map<string, number>();

  constructor(parts: ParkingParts) {
    this.parts = parts;
  }

  private get stopped(): boolean {
    return this.parts.stopping.aborted;
  }

  /**
   * A task sent back for a short wait (see `parks`: a pacing slot, a retry, a busy breaker; not an
   * open breaker, a held origin, the limiter, the bulkhead or a pause) waits here instead, under its
   * lease (the heartbeat renews it; its partition stays blocked, so order holds) and without its
   * worker, then goes through the gate again at its slot as a task leased again would (`went`, or
   * `voided` when a hold came meanwhile), its cancel and pause looked at again first. A retry is
   * still the attempt counted when it failed (its tryCount is in the task it carries); a busy
   * breaker is re-checked once per wait, BUSY_PARKS_MAX times in a row at most.
   * Parked tasks take no worker and count apart from the leases the loop may hold (LeaseBudget), so
   * a paced backlog never stops the loop leasing other origins' tasks; their own budget
   * (`parking`: tasks, and bytes of the records they hold) bounds their memory. A farther slot, or
   * one beyond the budget, goes back to the queue; so does a parked task when the
   * executor stops (with the rest of its wait), or whose lease may have lapsed meanwhile (see
   * LeaseHeartbeat.holds: another executor may hold it, and must be the one to call).
   */
  async park(job: Job, source: FetchOutcome | undefined, settlement: Settlement): Promise<Settlement> {
    const budget = this.parts.parking;
    // Busy breaker refusals waited out parked in a row: one re-check each, a few at most (see parks).
    let busyParks = 0;
    for (;;) {
      if (settlement.kind !== 'reschedule') return settlement;
      if (settlement.bulkhead) {
        const woken = await this.parkForSlot(job, source, settlement, settlement.bulkhead, budget);
        if (!('slot' in woken)) return woken;
        busyParks = 0;
        const { task, slot } = woken;
        try {
          // Not through the pool: a worker is freed with the call that handed the slot over, and
          // a slot idle while its task waits for a worker is the origin's, lost (workers waiting
          // 50 ms for a slot of the origin in acquire would hold them meanwhile).
          settlement = await this.parts.runner.attempt({ ...job, task }, source, undefined, true, slot);
        } finally {
          // Unless its call did (or will not have to): cancelled, paused, paced, cached meanwhile.
          slot.release();
        }
        continue;
      }
      const { outcome, delayMs, outbox, payload } = settlement;
      const bytes = payload ? parkedBytes(job, source, payload) : 0;
      const task =
        !outbox && payload && !this.stopped && parks(outcome, delayMs, bytes, this.parked, budget, busyParks)
          ? decodeTask(payload)
          : undefined;
      this.parts.endings.journalRetry(settlement, task ? 'executor' : outbox ? 'outbox' : 'redis');
      if (!task) return settlement;
      busyParks = outcome === 'breaker_busy' ? busyParks + 1 : 0;
      const until = Date.now() + settlement.delayMs;
      this.parkedMore(1, bytes, outcome);
      this.parts.freed();
      try {
        // Cut short when the executor stops: the task then goes back with the rest of its wait.
        await sleep(settlement.delayMs, undefined, { signal: this.parts.stopping }).catch(() => undefined);
      } finally {
        this.parkedMore(-1, -bytes, outcome);
        this.parts.budget.resumed();
      }
      if (this.stopped || !this.parts.heartbeat.holds(job))
        return { ...settlement, delayMs: Math.max(1, until - Date.now()) };
      const resumed: Job = { ...job, task };
      const { partition } = job.lease;
      settlement = await this.parts.pool.run(clientOfPartition(partition), partition, () =>
        this.parts.runner.attempt(resumed, source, undefined, true),
      );
    }
  }

  /**
   * A task the bulkhead refused waits parked (see waitsForSlot) until its origin has a slot for it:
   * handed over by a call of this process that ends (LocalBulkhead; a ClusterBulkhead asks Redis
   * for its line then, and at each of its re-checks), in the slot line's order (the queue's:
   * bulkhead/line.ts). Woken, it has the slot (it cannot be raced away) and goes through the gate again as
   * other parked tasks do. PARK_MAX_MS without one, a stop, or a lease that may have lapsed: back
   * to the queue (with the rest of the wait it was refused for), any slot handed over released.
   * Either way its `held` event says until when it may wait. Apart from park's other waits, as
   * it waits for an event and not a time.
   */
  private async parkForSlot(
    job: Job,
    source: FetchOutcome | undefined,
    settlement: Settlement & { kind: 'reschedule' },
    bulkhead: NonNullable<(Settlement & { kind: 'reschedule' })['bulkhead']>,
    budget: Parking,
  ): Promise<Settlement | { task: QueuedTask; slot: Granted }> {
    const { delayMs, outbox, payload } = settlement;
    const bytes = payload ? parkedBytes(job, source, payload) : 0;
    const line = `${safeOrigin(bulkhead.uri)}\0${bulkhead.client ?? ''}`;
    const waiting = this.slotWaits.get(line) ?? 0;
    const task =
      !outbox &&
      payload &&
      !this.stopped &&
      waiting < HELD_PER_WORKER * this.parts.budget.maxWorkers &&
      waitsForSlot(bytes, this.parked, budget)
        ? decodeTask(payload)
        : undefined;
    const parkedAt = Date.now();
    const { requestId, client } = bulkhead;
    const until = parkedAt + (task ? PARK_MAX_MS : delayMs);
    this.parts.journal?.emit({ type: 'held', requestId, client, by: bulkhead.by, until });
    if (!task) return settlement;
    this.parkedMore(1, bytes, bulkhead.by);
    this.slotWaits.set(line, waiting + 1);
    this.parts.freed();
    let slot: Granted | undefined;
    // A timer cleared when the wait ends, and a listener of the stop removed then: most waits end
    // in ms, and AbortSignal.timeout's timer lived out its 30 s (AbortSignal.any weakly tracked
    // each one on the stop's signal besides).
    const over = new AbortController();
    const end = () => over.abort();
    const timer = setTimeout(end, PARK_MAX_MS);
    this.parts.stopping.addEventListener('abort', end, { once: true });
    try {
      slot = await this.parts.policies.waitForSlot(
        bulkhead.uri,
        bulkhead.client,
        over.signal,
        bulkhead.partition,
        { paced: bulkhead.unpaced !== true, key: bulkhead.concurrencyKey },
      );
    } finally {
      clearTimeout(timer);
      this.parts.stopping.removeEventListener('abort', end);
      this.parkedMore(-1, -bytes, bulkhead.by);
      const left = (this.slotWaits.get(line) ?? 1) - 1;
      if (left > 0) this.slotWaits.set(line, left);
      else this.slotWaits.delete(line);
      this.parts.budget.resumed();
    }
    const waited = Date.now() - parkedAt;
    // The wait it was refused for is counted in its progress already: the one it had instead.
    const before = Math.max(0, (task.waitedMs ?? 0) - delayMs);
    if (slot && !this.stopped && this.parts.heartbeat.holds(job))
      return { task: { ...task, waitedMs: addWait(before, waited) }, slot };
    slot?.release();
    const rest = Math.max(1, delayMs - waited);
    const back = encodeQueuedTask({ ...task, waitedMs: addWait(before, waited + rest) });
    return { ...settlement, delayMs: rest, payload: back };
  }

  private parkedMore(tasks: number, bytes: number, reason: string): void {
    this.parked.tasks += tasks;
    this.parked.bytes += bytes;
    this.parts.budget.parked += tasks;
    const now = (this.parkedBy.get(reason) ?? 0) + tasks;
    this.parkedBy.set(reason, now);
    metrics.parked.set({ reason }, now);
    metrics.parkedBytes.set(this.parked.bytes);
  }
}

/**
 * What a parked task holds in memory, roughly: its `in` record (or the inline one in its queued
 * task) and its queued task as leased and as rewritten.
 */
function parkedBytes(job: Job, source: FetchOutcome | undefined, payload: string): number {
  const record = source?.ok ? (source.record.value?.length ?? 0) + (source.record.key?.length ?? 0) : 0;
  return record + job.lease.payload.length + payload.length;
}
