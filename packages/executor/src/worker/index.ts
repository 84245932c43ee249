import { hostname } from 'node:os';
import { clientOfPartition, type LeasedTask } from '@requester/queue';
import { createRequestContract, isWakeUp, type RequestContract } from '@requester/shared/contract';
import type { Logger } from '@requester/shared/log';
import { executorMetrics as metrics } from '../metrics.ts';
import { BORROW_LEASE, LeaseBudget } from './budget.ts';
import { LeaseHeartbeat } from './heartbeat.ts';
import type { ExecutorOptions } from './options.ts';
import { Outcomes } from './outcomes.ts';
import { DEFAULT_PARKING, ParkingLot } from './parking.ts';
import { Policies } from './policies.ts';
import { WorkerPool } from './pool.ts';
import { PreChecks } from './prechecks.ts';
import { Settler } from './settle.ts';
import type { Job, Settlement } from './settlement.ts';
import { decodeTask, readSources, withReplyTo } from './source.ts';
import { parseSource, TaskRunner } from './task.ts';

export { HELD_PER_WORKER, WAKE_UPS_HELD } from './budget.ts';
export type { ExecutorOptions, TaskQueue } from './options.ts';
export { DEFAULT_PARKING } from './parking.ts';
export { PAUSE_RECHECK_MS } from './prechecks.ts';
export type { ReplyOptions } from './settle.ts';

/** Shortest idle sleep: `nextWakeMs` may be 0 while nothing is leasable (e.g. a blocked partition). */
const MIN_IDLE_MS = 10;

/** How often the clients' weights are read again from the queue (see TaskQueue). */
const WEIGHTS_REFRESH_MS = 10_000;

/**
 * The executor (docs/architecture.md §3, §5), in parts as BullMQ's Worker and LockManager: this
 * loop leases as many tasks as its lease budget allows (budget.ts), reads their `in` records with
 * one batched fetch, and runs each task once through its parts: the worker pool (pool.ts, fair
 * between clients), the task's run (task.ts: pre-checks, the attempt under the policies, its
 * outcome, outcomes.ts), parking for a short wait (parking.ts), and the settlement (settle.ts: results produced
 * in batches, then the leases acked or rejected, so a crash between the two replays the task
 * instead of losing its result). The heartbeat (heartbeat.ts) keeps the held leases alive. A worker
 * (and the lease) is freed at the settlement, which is also what lets the next task of an ordered
 * partition be leased: order at the target follows from one-in-flight in the queue plus
 * ack-after-produce.
 */
export class Executor {
  private readonly options: ExecutorOptions;
  private readonly contract: RequestContract;
  private readonly log: Logger;
  private readonly budget: LeaseBudget;
  private readonly pool: WorkerPool;
  private readonly heartbeat: LeaseHeartbeat;
  private readonly preChecks: PreChecks;
  private readonly runner: TaskRunner;
  private readonly parking: ParkingLot;
  private readonly settler: Settler;
  private readonly batches = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private slotWaiters: Array<() => void> = [];
  private wakeScheduled = false;
  private loop: Promise<void> | undefined;
  private idleWake: AbortController | undefined;
  private weightsTimer: NodeJS.Timeout | undefined;
  /** Leases settled so far: tells the loop that settlements happened while it was leasing. */
  private settlements = 0;

  constructor(options: ExecutorOptions) {
    this.options = options;
    const policies = new Policies({ ...options, retryAfterMaxMs: options.retryAfterMaxMs ?? 3_600_000 });
    this.contract = options.contract ?? createRequestContract();
    this.log = options.logger.child({ component: 'executor' });
    this.budget = new LeaseBudget(options.maxWorkers);
    this.pool = new WorkerPool(options.maxWorkers);
    this.heartbeat = new LeaseHeartbeat(options.queue, options.leaseTtlMs, this.log);
    this.preChecks = new PreChecks(options, this.log);
    const endings = new Outcomes(options);
    const { journal } = options;
    this.runner = new TaskRunner({
      contract: this.contract,
      fetcher: options.fetcher,
      policies,
      preChecks: this.preChecks,
      endings,
      destinations: options.destinations,
      journal,
      executorId: options.executorId ?? `${hostname()}/${process.pid}`,
      log: this.log,
    });
    this.parking = new ParkingLot({
      budget: this.budget,
      pool: this.pool,
      runner: this.runner,
      heartbeat: this.heartbeat,
      policies,
      endings,
      journal,
      stopping: this.stopping.signal,
      parking: options.parking ?? DEFAULT_PARKING,
      freed: () => this.workDone(),
    });
    this.settler = new Settler(options, this.log);
  }

  start(): void {
    if (this.loop) return;
    this.heartbeat.start();
    if (this.options.queue.clientWeights) {
      void this.refreshWeights();
      this.weightsTimer = setInterval(() => void this.refreshWeights(), WEIGHTS_REFRESH_MS);
    }
    this.loop = this.run();
  }

  /** Stops leasing, finishes the tasks in hand (results produced and acked), then returns. */
  async drain(): Promise<void> {
    this.stopping.abort();
    this.wakeSlotWaiters();
    await this.loop;
    while (this.batches.size > 0) await Promise.allSettled([...this.batches]);
    await this.settler.inProgress;
    this.heartbeat.stop();
    clearInterval(this.weightsTimer);
    // Its own: their subscribers serve this executor's waits alone.
    await Promise.all([this.options.bulkhead?.close(), this.options.concurrency?.close()]);
  }

  /** Tasks leased and not yet settled. */
  get inFlight(): number {
    return this.heartbeat.size;
  }

  private get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      let size = this.budget.size();
      // Every worker taken: a lease may still find a client below its share, which borrows one.
      const borrowing = size <= 0;
      if (borrowing) size = this.budget.borrowSize(Date.now(), this.pool.waiting);
      if (size <= 0) {
        await this.slotFreed(this.budget.borrowIn(Date.now(), this.pool.waiting));
        continue;
      }
      try {
        const settlementsBefore = this.settlements;
        if (borrowing) this.budget.borrowed(Date.now(), false);
        const { tasks, nextWakeMs } = await this.options.queue.lease(size, this.options.leaseTtlMs);
        failures = 0;
        if (tasks.length === 0) {
          // A settlement during the lease may have readied a partition the lease did not see.
          if (this.settlements === settlementsBefore) await this.idle(Math.max(nextWakeMs, MIN_IDLE_MS));
          continue;
        }
        this.take(tasks, borrowing);
      } catch (err) {
        failures++;
        this.log.warn({ err, failures }, 'lease failed; backing off');
        await this.idle(Math.min(100 * 2 ** failures, 5_000));
      }
    }
  }

  /**
   * Sleeps until the queue's next event, or earlier: new work announced by a publisher, a stop, or
   * one of our own settlements (an ack or reject can make a partition ready again — the next task
   * of an ordered partition — and nobody else would announce that).
   */
  private async idle(ms: number): Promise<void> {
    const wake = new AbortController();
    this.idleWake = wake;
    try {
      await this.options.queue.waitForWork(ms, AbortSignal.any([this.stopping.signal, wake.signal]));
    } finally {
      this.idleWake = undefined;
    }
  }

  /** Holds the leases (heartbeats start covering them) and starts their batch. */
  private take(leases: LeasedTask[], borrowing: boolean): void {
    this.heartbeat.hold(leases);
    this.budget.taken(leases.length, Date.now());
    metrics.leases.inc(leases.length);
    metrics.inFlight.set(this.heartbeat.size);
    const entry = { entered: false };
    const batch = this.runBatch(leases, borrowing, entry).catch((err: unknown) => {
      // runBatch settles every task itself; reaching here is a bug, and the leases will lapse.
      this.log.error({ err }, 'executor batch failed');
      // Borrowing waits for a batch to enter the pool: this one never will.
      if (!entry.entered) this.budget.entered(leases.length);
    });
    this.batches.add(batch);
    void batch.finally(() => this.batches.delete(batch));
  }

  /**
   * One batched fetch for the whole lease batch, then every task runs once through its parts: a
   * call through the worker pool, a wake-up without a worker (it calls nobody, and the limiter,
   * bulkhead and breaker are not asked either); then its settlement. A call keeps its worker
   * until its result is written and acked. What a borrowing lease (see run) brings for clients not
   * below their share waits in the pool, BORROW_LEASE calls at most; the rest goes back to the
   * queue unattempted.
   */
  private async runBatch(
    leases: LeasedTask[],
    borrowing: boolean,
    entry: { entered: boolean },
  ): Promise<void> {
    const jobs: Job[] = [];
    const settled: Array<Promise<void>> = [];
    const leasedAt = Date.now();
    for (const lease of leases) {
      const task = decodeTask(lease.payload);
      if (task) jobs.push({ lease, task, leasedAt });
      else {
        this.workDone();
        const dead = { kind: 'dead', reason: 'queue payload is not a queued task' } as const;
        settled.push(this.settler.settle(lease, dead).finally(() => this.released(lease.token, 'none')));
      }
    }
    // The pauses are read again beside the records: a pause recorded before this lease holds it.
    const [sources] = await Promise.all([
      readSources(this.options.fetcher, jobs),
      this.options.pauses?.refresh(),
    ]);
    const parsed = jobs.map((job, i) => parseSource(this.contract, job, sources[i]));
    const wakeUps = parsed.map((p) => p?.ok === true && isWakeUp(p.envelope));
    const wakeUpCount = wakeUps.filter(Boolean).length;
    this.budget.read(leases.length, jobs.length, wakeUpCount);
    if (wakeUpCount > 0) this.wakeSoon();
    const over = this.callsOver(wakeUps);
    const cancellations = await this.preChecks.cancellationsOf(jobs, parsed);
    // Workers free for this batch's calls; a borrowing batch's calls beyond them must borrow.
    let room = borrowing
      ? this.options.maxWorkers - (this.budget.working - (jobs.length - wakeUpCount))
      : Number.POSITIVE_INFINITY;
    let borrowed = false;
    for (const [i, job] of jobs.entries()) {
      const source = sources[i];
      const { partition, token } = job.lease;
      const client = clientOfPartition(partition);
      const wakeUp = wakeUps[i] === true;
      let back = over.has(i);
      if (!wakeUp && !back) {
        if (room > 0) room--;
        else if (this.pool.mayBorrow(client)) borrowed = true;
        // A few wait in the pool for a worker, as they would have been leased next; more would
        // use up the room the next borrowing lease needs to find a client below its share.
        else if (this.pool.waiting >= BORROW_LEASE) back = true;
      }
      if (back) {
        const given = { kind: 'reschedule', delayMs: 0, outcome: 'given_back' } as const;
        settled.push(this.settler.settle(job.lease, given).finally(() => this.released(token, 'call')));
        continue;
      }
      const read = parsed[i] && { parsed: parsed[i], cancellation: cancellations[i] };
      const attempt = () => this.runner.attempt(job, source, read);
      const attempted = wakeUp
        ? attempt()
        : this.pool.run(client, partition, attempt).then((settlement) =>
            // Most settle at once: park (an async frame and promise per call) is for a reschedule.
            settlement.kind === 'reschedule' ? this.parking.park(job, source, settlement) : settlement,
          );
      const done = attempted.then((settlement: Settlement) =>
        this.settler.settle(job.lease, withReplyTo(settlement, source), job.task.createdAt),
      );
      settled.push(done.finally(() => this.released(token, wakeUp ? 'wake-up' : 'call')));
    }
    this.budget.entered(leases.length);
    entry.entered = true;
    if (borrowing) {
      this.budget.borrowed(Date.now(), borrowed);
      this.wakeSoon();
    }
    await Promise.all(settled);
  }

  /**
   * The calls of a lease batch (by index) beyond the calls' bound (LeaseBudget.callsOver), the
   * last ones first: they go back to the queue unattempted (a reject without delay: an ordered one
   * keeps its partition's head).
   */
  private callsOver(wakeUps: boolean[]): Set<number> {
    const back = new Set<number>();
    let excess = this.budget.callsOver();
    for (let i = wakeUps.length - 1; i >= 0 && excess > 0; i--) {
      if (wakeUps[i]) continue;
      back.add(i);
      excess--;
    }
    return back;
  }

  /**
   * A lease is settled: no longer renewed, out of the budget, and its worker free (`call`; a
   * wake-up's was freed when its record was read). The loop is woken: a settlement may have
   * readied the next task of an ordered partition, which nobody else would announce.
   */
  private released(token: string, what: 'call' | 'wake-up' | 'none'): void {
    this.heartbeat.release(token);
    this.budget.settled(what === 'wake-up');
    metrics.inFlight.set(this.heartbeat.size);
    this.settlements++;
    if (what === 'call') this.workDone();
    else this.wakeSoon();
    this.idleWake?.abort();
  }

  /** A task's worker is free (a call settled or parked): it can take another lease. */
  private workDone(): void {
    this.budget.freed(Date.now());
    this.wakeSoon();
  }

  /**
   * Wakes the loop once per turn of the event loop, so that the workers a batch frees together
   * make one lease call, not one each.
   */
  private wakeSoon(): void {
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.wakeSlotWaiters();
    });
  }

  /** The weights of the queue's clients, for the pool's shares; the last ones read stand on failure. */
  private async refreshWeights(): Promise<void> {
    try {
      const weights = await this.options.queue.clientWeights?.();
      if (weights) this.pool.setWeights(weights);
    } catch (err) {
      this.log.warn({ err }, 'client weights not readable: the last ones read stand');
    }
  }

  /** Resolves when a worker is freed (or a stop), or after `ms` (when a borrowing lease may go). */
  private slotFreed(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      if (ms === Number.POSITIVE_INFINITY) {
        this.slotWaiters.push(resolve);
        return;
      }
      const timer = setTimeout(resolve, ms);
      this.slotWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private wakeSlotWaiters(): void {
    const waiters = this.slotWaiters;
    this.slotWaiters = [];
    for (const wake of waiters) wake();
  }
}
