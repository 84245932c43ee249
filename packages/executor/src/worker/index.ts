import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { originOf } from '@requester/policies';
import type { FairQueue, LeasedTask } from '@requester/queue';
import { type Cancellation, type Cancellations, cancelledResult } from '@requester/shared/cancel';
import {
  createRequestContract,
  DEAD_LETTER_REASONS,
  deadLetterMessage,
  deadlineAt,
  errorResult,
  isDeadlineInstant,
  isWakeUp,
  type RequestContract,
  type RequestEnvelope,
  type ResultEnvelope,
  sourcedResult,
  withDeadlineInstant,
} from '@requester/shared/contract';
import type { DestinationCatalog } from '@requester/shared/destinations';
import type { Journal, JournalEventInput } from '@requester/shared/journal';
import type { FetchedRecord, Fetcher, FetchOutcome, KafkaProducer } from '@requester/shared/kafka';
import { type LazyChild, type Logger, lazyChild } from '@requester/shared/log';
import type { Outbox } from '@requester/shared/outbox';
import type { PauseView } from '@requester/shared/pause';
import { encodeQueuedTask, type QueuedTask } from '@requester/shared/task';
import pLimit, { type LimitFunction } from 'p-limit';
import { type Granted, linePartition } from '../bulkhead/index.ts';
import { executorMetrics as metrics } from '../metrics.ts';
import { ownedBy, unreadableResult } from '../result/index.ts';
import {
  addWait,
  isQueueDelay,
  missesDeadline,
  PARK_MAX_MS,
  type Parking,
  parks,
  placeOf,
  waitsForSlot,
} from './decide.ts';
import { prepareDestination, withApplied } from './destination.ts';
import { type Ending, Policies, type PolicyModules, type Progress } from './policies.ts';
import { type ReplyOptions, Settler } from './settle.ts';
import { deliver, type Job, KAFKA_RETRY_MS, outboxRow, type Settlement } from './settlement.ts';
import { decodeTask, inlineRequest, type Parsed, parseRecord, readSources, withReplyTo } from './source.ts';
import { requeueTrace, traced, withTraceId } from './trace.ts';

export type { ReplyOptions } from './settle.ts';

/** What the executor needs of the queue (FairQueue provides it). */
export type TaskQueue = Pick<
  FairQueue,
  'lease' | 'extendMany' | 'ackMany' | 'rejectMany' | 'deadLetterMany' | 'waitForWork'
>;

/**
 * The executor's wiring. The policy modules (`limiter`, `breaker`, `cache`, `signingKeys`, see
 * PolicyModules) are optional so that a bare executor (tests, benchmarks) runs without Redis
 * policies; the role always gives them all.
 */
export interface ExecutorOptions extends Omit<PolicyModules, 'retryAfterMaxMs'> {
  queue: TaskQueue;
  fetcher: Pick<Fetcher, 'fetchMany'>;
  producer: KafkaProducer;
  topicOut: string;
  /** max.message.bytes of `out` (KAFKA_MAX_MESSAGE_BYTES): a bigger result is answered as too large. */
  maxResultBytes?: number;
  /** Dead-letter records of failed requests go here; none are written without it. */
  topicDlq?: string;
  /** Where unordered tasks wait beyond `horizonMs`; without it every wait stays in Redis. */
  outbox?: Pick<Outbox, 'add'>;
  /** REDIS_HORIZON: the longest wait kept in Redis for an unordered task. */
  horizonMs?: number;
  /** RETRY_AFTER_MAX (default 1 h). */
  retryAfterMaxMs?: number;
  maxWorkers: number;
  leaseTtlMs: number;
  produceTimeoutMs: number;
  logger: Logger;
  contract?: RequestContract;
  /** Names this executor in the journal's `leased` events. */
  executorId?: string;
  /** Where sync results are routed to their gateway (see `Settler.publishReplies`); none are without it. */
  replies?: ReplyOptions;
  /**
   * Cancelled requests (../../shared cancel): asked before an attempt (one read per lease batch)
   * and before a reschedule; none without it.
   */
  cancellations?: Pick<Cancellations, 'find' | 'findMany'> &
    Partial<Pick<Cancellations, 'mark' | 'unchangedSince'>>;
  /** Pauses by origin, client or partition (../../shared pause): a paused task waits, not attempted. */
  pauses?: Pick<PauseView, 'any' | 'match' | 'refresh'>;
  /** The destinations requests name (meta.destination); without it such a request is refused. */
  destinations?: Pick<DestinationCatalog, 'current'>;
  /** EXECUTOR_PARKED_TASKS, EXECUTOR_PARKED_BYTES: the most tasks kept parked (see Executor.park). */
  parking?: Parking;
}

/** How recent a lease's cancel read stands for a task woken with a bulkhead slot (see attempt). */
const CANCEL_FRESH_MS = 1_000;

/** How long a paused task waits before it is looked at again (a resume is honoured within it). */
export const PAUSE_RECHECK_MS = 1_000;

/** Shortest idle sleep: `nextWakeMs` may be 0 while nothing is leasable (e.g. a blocked partition). */
const MIN_IDLE_MS = 10;

/**
 * Leases held at most, per worker. A wake-up (empty `request.uri`) takes no worker once its record
 * is read, so a lease may ask for more tasks than there are free workers when recent batches were
 * wake-ups (see leaseSize), and the loop leases the next batch while they wait for their flush.
 * Before, a wake-up held a worker until its result was produced and acked: a process ran at most
 * MAX_WORKERS of them per lease + produce + ack round trips (~1,000–1,500 wake-ups/s with 32),
 * and each lease and flush call carried 32 tasks at most. The bound keeps small what a slow `out`
 * can pile up (results made but not yet written, made again elsewhere if this process dies) and
 * what a lease sized for wake-ups can hold back from other executors when it brings calls instead.
 */
export const HELD_PER_WORKER = 4;

/**
 * Wake-ups held at most per process besides the workers' bound (HELD_PER_WORKER): read, their
 * results made and waiting for a flush (~3 KiB each with its lease, record and result, estimated:
 * ~6 MiB at most). A lease of wake-ups may ask for this many, so a drain at an instant ("send at
 * 09:00") moves in calls of hundreds of tasks (lease, produce, ack) rather than 64: the pace is the
 * held tasks over one lease + read + produce + ack round, and a round's time is mostly waiting on
 * the shared Redis and cores. A call leased in such a batch beyond the workers'
 * bound goes back to the queue unattempted (see givenBack), so other executors are not held from
 * calls more than before.
 */
export const WAKE_UPS_HELD = 2_048;

/**
 * The parking budget without configuration (the defaults of EXECUTOR_PARKED_TASKS and
 * EXECUTOR_PARKED_BYTES): 1,000 tasks cover 10 s of a 100/s pace, or the 30 s of PARK_MAX_MS at 33/s; 32 MiB of records
 * at most, e.g. 1,000 records of 32 KiB, or 32 of 1 MiB.
 */
export const DEFAULT_PARKING: Parking = { tasks: 1_000, bytes: 32 * 1024 * 1024 };

/**
 * The executor loop (docs/architecture.md §3, §5). Each turn it leases as many tasks as it has
 * free workers (more when recent batches were wake-ups: leaseSize), reads their `in` records with
 * one batched fetch, and runs each task's attempt under the delivery policies (p-limit; see
 * policies.ts, decide.ts). Results
 * (and dead letters) are produced in batches — whatever finished while the previous batch was
 * being written goes out in one produce — and only then acked, so a crash between the two replays
 * the task (at-least-once) instead of losing its result. Rescheduled tasks go back to the queue
 * (rejected with their delay and progress) or to the outbox (then acked), in the same flush.
 * A worker (and the lease) is freed at the settlement, which is also what lets the next task of an
 * ordered partition be leased: order at the target follows from one-in-flight in the queue plus
 * ack-after-produce. A wake-up takes no worker once its record is read; at most HELD_PER_WORKER ×
 * `maxWorkers` calls and WAKE_UPS_HELD wake-ups are held, besides the tasks parked for a short
 * wait (see park). A flush writes its batch while the previous one is being acked (settle.ts).
 * Beside this loop: settle.ts (the flush), source.ts (reading a task's record), trace.ts (its spans).
 */
export class Executor {
  private readonly options: ExecutorOptions;
  private readonly policies: Policies;
  private readonly contract: RequestContract;
  private readonly log: Logger;
  private readonly limit: LimitFunction;
  private readonly held = new Map<string, LeasedTask>();
  /** Leased tasks not yet settled, wake-ups aside: each holds one of the `maxWorkers` workers. */
  private working = 0;
  private wakeScheduled = false;
  /** The share of wake-ups in recent lease batches (halved per batch): how far a lease may outgrow the free workers. */
  private wakeUpShare = 0;
  /** Wake-ups in the latest lease batch: the next lease asks for twice as many at most (leaseSize). */
  private lastWakeUps = 0;
  /** Wake-ups leased and not yet settled (see WAKE_UPS_HELD). */
  private wakeUpsHeld = 0;
  /** Tasks leased whose records are not read yet: calls or wake-ups, not known. */
  private unread = 0;
  private readonly batches = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private readonly settler: Settler;
  private slotWaiters: Array<() => void> = [];
  private loop: Promise<void> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private idleWake: AbortController | undefined;
  /** Flushes completed so far: tells the loop that settlements happened while it was leasing. */
  private flushes = 0;
  private readonly journal: Journal | undefined;
  private readonly executorId: string;
  /** Tasks whose pause this process journaled already (a paused task comes back every second). */
  private readonly pauseJournaled = new Set<string>();
  /** Tasks waiting in this process for a pacing slot, a retry, a busy breaker or a bulkhead slot, holding their lease but no worker (see park). */
  private readonly parked: Parking = { tasks: 0, bytes: 0 };
  /**
   * Tasks parked for a slot, by origin and client: at most HELD_PER_WORKER × `maxWorkers` each (the
   * leases the loop may hold besides). More would only wait
   * longer (the slots come at the origin's pace) while the loop leases more of them for nothing: a
   * backlog's tasks beyond it go back to the queue as before, another client's still park (and,
   * in the slot line's order, are handed the next slot).
   */
  private readonly slotWaits = new Map<string, number>();
  /** The parked tasks by what they wait for (the gauge's `reason`). */
  private readonly parkedBy = new Map<string, number>();
  /** Leases the heartbeat found lost (lapsed, and maybe leased by another executor): not to be called. */
  private readonly lost = new Set<string>();
  /** When the last heartbeat that renewed the held leases was sent (epoch ms). */
  private renewedAt = 0;

  constructor(options: ExecutorOptions) {
    this.options = options;
    this.policies = new Policies({ ...options, retryAfterMaxMs: options.retryAfterMaxMs ?? 3_600_000 });
    this.contract = options.contract ?? createRequestContract();
    this.log = options.logger.child({ component: 'executor' });
    this.limit = pLimit(options.maxWorkers);
    this.journal = options.journal;
    this.executorId = options.executorId ?? `${hostname()}/${process.pid}`;
    this.settler = new Settler(options, this.log, {
      release: (token) => {
        this.held.delete(token);
        this.lost.delete(token);
      },
      flushed: () => this.flushed(),
    });
  }

  start(): void {
    if (this.loop) return;
    this.heartbeat = setInterval(() => void this.extendLeases(), Math.max(1, this.options.leaseTtlMs / 3));
    this.loop = this.run();
  }

  /** Stops leasing, finishes the tasks in hand (results produced and acked), then returns. */
  async drain(): Promise<void> {
    this.stopping.abort();
    this.wakeSlotWaiters();
    await this.loop;
    while (this.batches.size > 0) await Promise.allSettled([...this.batches]);
    await this.settler.inProgress;
    clearInterval(this.heartbeat);
  }

  /** Tasks leased and not yet settled. */
  get inFlight(): number {
    return this.held.size;
  }

  private get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      const free = this.leaseSize();
      if (free <= 0) {
        await this.slotFreed();
        continue;
      }
      try {
        const flushesBefore = this.flushes;
        const { tasks, nextWakeMs } = await this.options.queue.lease(free, this.options.leaseTtlMs);
        failures = 0;
        if (tasks.length === 0) {
          // A settlement during the lease may have readied a partition the lease did not see.
          if (this.flushes === flushesBefore) await this.idle(Math.max(nextWakeMs, MIN_IDLE_MS));
          continue;
        }
        this.take(tasks);
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
  private take(leases: LeasedTask[]): void {
    for (const lease of leases) this.held.set(lease.token, lease);
    this.working += leases.length;
    this.unread += leases.length;
    metrics.leases.inc(leases.length);
    metrics.inFlight.set(this.held.size);
    const batch = this.runBatch(leases).catch((err: unknown) => {
      // runBatch settles every task itself; reaching here is a bug, and the leases will lapse.
      this.log.error({ err }, 'executor batch failed');
    });
    this.batches.add(batch);
    void batch.finally(() => this.batches.delete(batch));
  }

  /** One batched fetch for the whole lease batch, then every task runs under the p-limit. */
  private async runBatch(leases: LeasedTask[]): Promise<void> {
    const jobs: Job[] = [];
    const settled: Array<Promise<void>> = [];
    const leasedAt = Date.now();
    for (const lease of leases) {
      const task = decodeTask(lease.payload);
      if (task) jobs.push({ lease, task, leasedAt });
      else {
        this.workDone();
        settled.push(
          this.settler.settle(lease, { kind: 'dead', reason: 'queue payload is not a queued task' }),
        );
      }
    }
    // The pauses are read again beside the records: a pause recorded before this lease holds it.
    const [sources] = await Promise.all([
      readSources(this.options.fetcher, jobs),
      this.options.pauses?.refresh(),
    ]);
    const parsed = jobs.map((job, i) => parseSource(this.contract, job, sources[i]));
    this.unread -= leases.length;
    const wakeUps = this.freeWakeUps(parsed);
    const givenBack = this.givenBack(wakeUps);
    const cancellations = await this.cancellationsOf(jobs, parsed);
    for (const [i, job] of jobs.entries()) {
      const source = sources[i];
      if (givenBack.has(i)) {
        const back = { kind: 'reschedule', delayMs: 0, outcome: 'given_back' } as const;
        settled.push(this.settler.settle(job.lease, back).finally(() => this.workDone()));
        continue;
      }
      const read = parsed[i] && { parsed: parsed[i], cancellation: cancellations[i] };
      const attempt = () => this.attempt(job, source, read);
      // A wake-up calls nobody: it does not wait for a worker (the limiter, bulkhead and breaker
      // are not asked either). A call keeps its worker until its result is written and acked.
      const attempted = wakeUps[i]
        ? attempt()
        : this.limit(attempt).then((settlement) =>
            // Most settle at once: park (an async frame and promise per call) is for a reschedule.
            settlement.kind === 'reschedule' ? this.park(job, source, settlement) : settlement,
          );
      const done = attempted.then((settlement) =>
        this.settler.settle(job.lease, withReplyTo(settlement, source), job.task.createdAt),
      );
      settled.push(done.finally(() => (wakeUps[i] ? this.wakeUpsHeld-- : this.workDone())));
    }
    await Promise.all(settled);
  }

  /**
   * A task sent back for a short wait (see `parks`: a pacing slot, a retry, a busy breaker; not an
   * open breaker, a held origin, the limiter, the bulkhead or a pause) waits here instead, under its
   * lease (the heartbeat renews it; its partition stays blocked, so order holds) and without its
   * worker, then goes through the gate again at its slot as a task leased again would (`went`, or
   * `voided` when a hold came meanwhile), its cancel and pause looked at again first. A retry is
   * still the attempt counted when it failed (its tryCount is in the task it carries); a busy
   * breaker is re-checked once per wait, BUSY_PARKS_MAX times in a row at most. Before, it
   * went back to the queue: two leases per such task.
   * Parked tasks take no worker and count apart from the leases the loop may hold (leaseSize), so
   * a paced backlog never stops the loop leasing other origins' tasks; their own budget
   * (`parking`: tasks, and bytes of the records they hold) bounds their memory. A farther slot, or
   * one beyond the budget, goes back to the queue as before; so does a parked task when the
   * executor stops (with the rest of its wait), or whose lease may have lapsed meanwhile (see
   * leaseHeld: another executor may hold it, and must be the one to call).
   */
  private async park(
    job: Job,
    source: FetchOutcome | undefined,
    settlement: Settlement,
  ): Promise<Settlement> {
    const budget = this.options.parking ?? DEFAULT_PARKING;
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
          // Not behind the p-limit: a worker is freed with the call that handed the slot over, and
          // a slot idle while its task waits for a worker is the origin's, lost (workers waiting
          // 50 ms for a slot of the origin in acquire would hold them meanwhile).
          settlement = await this.attempt({ ...job, task }, source, undefined, true, slot);
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
      this.journalRetry(settlement, task ? 'executor' : outbox ? 'outbox' : 'redis');
      if (!task) return settlement;
      busyParks = outcome === 'breaker_busy' ? busyParks + 1 : 0;
      const until = Date.now() + settlement.delayMs;
      this.parkedMore(1, bytes, outcome);
      this.workDone();
      try {
        // Cut short when the executor stops: the task then goes back with the rest of its wait.
        await sleep(settlement.delayMs, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      } finally {
        this.parkedMore(-1, -bytes, outcome);
        this.working++;
      }
      if (this.stopped || !this.leaseHeld(job))
        return { ...settlement, delayMs: Math.max(1, until - Date.now()) };
      const resumed: Job = { ...job, task };
      settlement = await this.limit(() => this.attempt(resumed, source, undefined, true));
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
    bulkhead: { requestId: string; client: string | undefined; uri: string; partition: string },
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
      waiting < HELD_PER_WORKER * this.options.maxWorkers &&
      waitsForSlot(bytes, this.parked, budget)
        ? decodeTask(payload)
        : undefined;
    const parkedAt = Date.now();
    const { requestId, client } = bulkhead;
    const until = parkedAt + (task ? PARK_MAX_MS : delayMs);
    this.journal?.emit({ type: 'held', requestId, client, by: 'bulkhead', until });
    if (!task) return settlement;
    this.parkedMore(1, bytes, 'bulkhead');
    this.slotWaits.set(line, waiting + 1);
    this.workDone();
    let slot: Granted | undefined;
    // A timer cleared when the wait ends, and a listener of the stop removed then: most waits end
    // in ms, and AbortSignal.timeout's timer lived out its 30 s (AbortSignal.any weakly tracked
    // each one on the stop's signal besides).
    const over = new AbortController();
    const end = () => over.abort();
    const timer = setTimeout(end, PARK_MAX_MS);
    this.stopping.signal.addEventListener('abort', end, { once: true });
    try {
      slot = await this.policies.waitForSlot(bulkhead.uri, bulkhead.client, over.signal, bulkhead.partition);
    } finally {
      clearTimeout(timer);
      this.stopping.signal.removeEventListener('abort', end);
      this.parkedMore(-1, -bytes, 'bulkhead');
      const left = (this.slotWaits.get(line) ?? 1) - 1;
      if (left > 0) this.slotWaits.set(line, left);
      else this.slotWaits.delete(line);
      this.working++;
    }
    const waited = Date.now() - parkedAt;
    // The wait it was refused for is counted in its progress already: the one it had instead.
    const before = Math.max(0, (task.waitedMs ?? 0) - delayMs);
    if (slot && !this.stopped && this.leaseHeld(job))
      return { task: { ...task, waitedMs: addWait(before, waited) }, slot };
    slot?.release();
    const rest = Math.max(1, delayMs - waited);
    const back = encodeQueuedTask({ ...task, waitedMs: addWait(before, waited + rest) });
    return { ...settlement, delayMs: rest, payload: back };
  }

  private parkedMore(tasks: number, bytes: number, reason: string): void {
    this.parked.tasks += tasks;
    this.parked.bytes += bytes;
    const now = (this.parkedBy.get(reason) ?? 0) + tasks;
    this.parkedBy.set(reason, now);
    metrics.parked.set({ reason }, now);
    metrics.parkedBytes.set(this.parked.bytes);
  }

  /**
   * Whether a parked task's lease is surely still this executor's, a third of its TTL to spare:
   * the heartbeat did not find it lost, and renewed it (or it was leased) recently enough. A
   * heartbeat that keeps failing (Redis unreachable) lets the lease lapse; another executor may
   * then lease the task and call, so this one does not (the task goes back: refused as stale if
   * the other holds it).
   */
  private leaseHeld(job: Job): boolean {
    if (this.lost.has(job.lease.token)) return false;
    const { leaseTtlMs } = this.options;
    return Date.now() < Math.max(job.leasedAt, this.renewedAt) + leaseTtlMs - leaseTtlMs / 3;
  }

  /**
   * How many tasks the next lease asks for: one per free worker, more when recent batches were
   * wake-ups, which take none: for calls, HELD_PER_WORKER per free worker at most and
   * HELD_PER_WORKER × `maxWorkers` calls held; when mostly wake-ups, as many as keep the expected
   * calls within the free workers and the expected wake-ups within the free WAKE_UPS_HELD budget
   * and twice the latest batch's wake-ups. Parked tasks aside. Bigger lease batches
   * are also fewer lease, produce and ack calls per task.
   */
  private leaseSize(): number {
    const { maxWorkers } = this.options;
    // The records of the latest batches may still be being read: the wake-ups expected among them
    // will take no worker, so a drain's next lease overlaps the previous batch's read.
    const workers = maxWorkers - this.working + Math.floor(this.unread * this.wakeUpShare);
    if (workers <= 0) return 0;
    const callShare = Math.max(1 - this.wakeUpShare, 1 / HELD_PER_WORKER);
    // Parked tasks have a budget of their own (see park), and so have wake-ups (WAKE_UPS_HELD).
    const held = this.held.size - this.parked.tasks - this.wakeUpsHeld;
    const forCalls = Math.min(Math.ceil(workers / callShare), HELD_PER_WORKER * maxWorkers - held);
    // Mostly wake-ups lately: a lease whose expected calls still fit the free workers, and whose
    // expected wake-ups fit the free wake-up budget and are at most twice as many as the latest
    // batch brought (a drain doubles its batches; a batch without any stops it). So a steady mix
    // leases as before (3 wake-ups in 4: 4 per free worker), and only a drain goes beyond. The
    // calls a lease brings beyond the calls' bound all the same are given back (givenBack).
    const share = this.wakeUpShare;
    const free = WAKE_UPS_HELD - this.wakeUpsHeld - this.unread;
    const room = Math.min(free, 2 * this.lastWakeUps);
    const fitting = Math.min(workers / Math.max(1 - share, 1e-6), room / Math.max(share, 1e-6), free);
    const forWakeUps = room <= 0 ? 0 : Math.floor(fitting);
    return Math.max(forCalls, forWakeUps);
  }

  /** Which tasks of a lease batch are wake-ups; their workers are free from now on. */
  private freeWakeUps(parsed: Array<Parsed | undefined>): boolean[] {
    const wakeUps = parsed.map((p) => p?.ok === true && isWakeUp(p.envelope));
    const count = wakeUps.filter(Boolean).length;
    this.wakeUpShare = (this.wakeUpShare + count / Math.max(parsed.length, 1)) / 2;
    this.wakeUpsHeld += count;
    this.lastWakeUps = count;
    for (let i = 0; i < count; i++) this.workDone();
    return wakeUps;
  }

  /**
   * The calls of a lease batch (by index) that go back to the queue unattempted (a reject without
   * delay: an ordered one keeps its partition's head): those beyond the HELD_PER_WORKER ×
   * `maxWorkers` calls held, which a lease sized for wake-ups (leaseSize) may bring when the work
   * turned to calls. Held here they would wait for this process's workers while other executors
   * could run them; the wake-up share falls with the batch, so the next lease is sized for calls.
   */
  private givenBack(wakeUps: boolean[]): Set<number> {
    const back = new Set<number>();
    const calls = this.held.size - this.parked.tasks - this.wakeUpsHeld - this.unread;
    let excess = calls - HELD_PER_WORKER * this.options.maxWorkers;
    for (let i = wakeUps.length - 1; i >= 0 && excess > 0; i--) {
      if (wakeUps[i]) continue;
      back.add(i);
      excess--;
    }
    return back;
  }

  /**
   * The cancels of a lease batch's requests, in one read (an `undefined` for a task whose record
   * did not parse). A Redis that does not answer is no cancel (see cancelled). Each job asked is
   * given the watch's mark of the read (see knownCancel); one not asked, or a read failed, none.
   */
  private async cancellationsOf(
    jobs: Job[],
    parsed: Array<Parsed | undefined>,
  ): Promise<Array<Cancellation | undefined>> {
    for (const job of jobs) job.cancelRead = { mark: undefined };
    const { cancellations } = this.options;
    const asked: number[] = [];
    const requests: Array<{ client: string | undefined; requestId: string; createdAtMs?: number }> = [];
    parsed.forEach((p, i) => {
      if (!p?.ok) return;
      asked.push(i);
      const { client, requestId } = p.envelope.meta;
      requests.push({ client, requestId, createdAtMs: jobs[i]?.task.createdAt });
    });
    const found: Array<Cancellation | undefined> = new Array(parsed.length);
    if (!cancellations || requests.length === 0) return found;
    try {
      const mark = cancellations.mark?.();
      const answers = await cancellations.findMany(requests);
      asked.forEach((index, n) => {
        found[index] = answers[n];
        const job = jobs[index];
        if (job) job.cancelRead = { mark };
      });
    } catch (err) {
      this.log.warn({ err, requests: requests.length }, 'cancels not readable: going on');
    }
    return found;
  }

  /**
   * Turns one task into its settlement; never throws (a bug becomes an `internal` error result).
   * `read`: its record parsed and its cancel looked up with its lease batch (else both are done here).
   */
  private async attempt(
    job: Job,
    fetched: FetchOutcome | undefined,
    read?: { parsed: Parsed; cancellation: Cancellation | undefined },
    parked = false,
    slot?: Granted,
  ): Promise<Settlement> {
    const { requestId } = job.task;
    // Where the task stands. Every reschedule rewrites the queued task with its progress (see
    // settlementOf); a lease lost to a crash is not counted (the Idempotency-Key covers its duplicate).
    const progress: Progress = {
      tryCount: job.task.tryCount,
      waitedMs: job.task.waitedMs ?? 0,
      pacedAt: job.task.pacedAt,
    };
    const log = lazyChild(this.log, { requestId });
    try {
      if (!fetched?.ok) {
        this.journalLeased(job, undefined);
        const error = fetched?.error;
        if (!error || error.code === 'dependency_unavailable') {
          log.warn({ err: error }, 'in-record not readable now; the task will be tried again');
          return { kind: 'reschedule', delayMs: KAFKA_RETRY_MS, outcome: 'kafka_unavailable' };
        }
        log.warn({ err: error }, 'in-record is gone: answering with an error result');
        return deliver(unreadableResult(requestId, error, job.task.tryCount), error.code);
      }
      const { inline, tryCount } = job.task;
      const parsed =
        read?.parsed ??
        (inline
          ? inlineRequest(this.contract, inline, requestId, tryCount)
          : parseRecord(this.contract, fetched.record.value, requestId, tryCount));
      if (!parsed.ok && inline) return await this.attemptFromKafka(job);
      // A wake-up's `leased` goes with its result's `completed`, so both are one journal record (one
      // per request and flush; apart, about every other wake-up of a drain made two); the event
      // keeps the lease's time. A parked task was not leased again: its story has one `leased` for
      // both of its gates.
      const client = parsed.ok ? parsed.envelope.meta.client : undefined;
      if (!parked && parsed.ok && isWakeUp(parsed.envelope)) {
        const leased = this.leasedEvent(job, client);
        const settlement = await this.attemptParsed(
          job,
          fetched.record,
          parsed.envelope,
          progress,
          log,
          read,
          slot,
        ).catch((err: unknown) => {
          this.journal?.emit(leased); // its `internal` result goes without it
          throw err;
        });
        if (settlement.kind === 'deliver') return { ...settlement, leased };
        this.journal?.emit(leased);
        return settlement;
      }
      if (!parked) this.journalLeased(job, client);
      if (!parsed.ok) return this.unprocessable(job, fetched.record, parsed.result);
      return await this.attemptParsed(job, fetched.record, parsed.envelope, progress, log, read, slot);
    } catch (err) {
      log.error({ err }, 'executor failed on a task: answering with an internal error');
      const message = err instanceof Error ? err.message : String(err);
      return deliver(
        errorResult(requestId, 'internal', message, { tryCount: job.task.tryCount }),
        'internal',
      );
    }
  }

  /** attempt, once the task's record is read as a request (and its `leased` journaled or held). */
  private async attemptParsed(
    job: Job,
    record: FetchedRecord,
    envelope: RequestEnvelope,
    progress: Progress,
    log: LazyChild,
    read: { parsed: Parsed; cancellation: Cancellation | undefined } | undefined,
    slot: Granted | undefined,
  ): Promise<Settlement> {
    const known = read
      ? { found: read.cancellation }
      : this.knownCancel(job, envelope, slot !== undefined && Date.now() - job.leasedAt < CANCEL_FRESH_MS);
    const cancelled = await this.cancelled(job, envelope, progress, known);
    if (cancelled) return cancelled;
    const deadline = deadlineOf(job.task, envelope);
    if (deadline !== undefined && missesDeadline(deadline, Date.now()))
      return this.expired(envelope, progress, deadline, 'queued');
    // The policies see the call its destination makes of the request; the settlement (outbox row,
    // dead letter) keeps the request as sent, so that it is resolved again when it comes back.
    const prepared = await prepareDestination(this.options.destinations, envelope, progress.tryCount);
    if (prepared.kind === 'settled') return prepared.settlement;
    const paused = this.paused(job, prepared.kind === 'call' ? prepared.call(envelope) : envelope);
    if (paused) return paused;
    const taskLog: LazyChild = envelope.meta.client ? log.with({ client: envelope.meta.client }) : log;
    // The origin a bulkhead wait is for is the one called.
    const callUri = (traced: RequestEnvelope) =>
      prepared.kind === 'call' ? prepared.call(traced).request.uri : traced.request.uri;
    const attempt = (traced: RequestEnvelope) =>
      prepared.kind === 'as-is'
        ? this.policies.attempt(traced, progress, taskLog, slot)
        : this.policies
            .attempt(prepared.call(traced), progress, taskLog, slot)
            .then((ending) => withApplied(ending, prepared.applied));
    return await traced(job, record, envelope, (traced) =>
      attempt(traced).then((ending) =>
        // Cancelled while in flight: the attempt made stands, no further one (nor a wait) follows.
        ending.kind === 'reschedule'
          ? this.cancelled(job, traced, ending.progress, this.knownCancel(job, traced, false)).then(
              (late) => late ?? this.settlementOf(job, traced, ending, callUri(traced)),
            )
          : this.settlementOf(job, traced, ending),
      ),
    );
  }

  /**
   * No cancel, when the task's last read of it still stands (else undefined: it is read again).
   * With the cancel watch subscribed, the read stands while no cancel of the request was announced
   * since it was sent (Cancellations.unchangedSince): a task parked for a slot, a retry or a pace,
   * or rescheduled by its attempt, reads its cancel again only when one was announced meanwhile.
   * Without a mark (no watch, its subscriber down when the read was sent, or the read failed):
   * `fresh`, a task handed a bulkhead slot within CANCEL_FRESH_MS of its lease, is not asked again,
   * the lease batch's read being as fresh as for a call that waited in its worker (a GET per such
   * call, ~0.5 per task under load, for a cancel a few hundred ms newer).
   */
  private knownCancel(job: Job, envelope: RequestEnvelope, fresh: boolean): { found: undefined } | undefined {
    const mark = job.cancelRead?.mark;
    if (mark === undefined) return fresh ? { found: undefined } : undefined;
    const { client, requestId } = envelope.meta;
    return this.options.cancellations?.unchangedSince?.(mark, client, requestId)
      ? { found: undefined }
      : undefined;
  }

  /**
   * The `cancelled` result, when the request was cancelled (a cancel applies to copies accepted
   * before it). Its holder of the lease is its one writer: the task is acked with it, never run
   * again. A Redis that does not answer is no cancel: the attempt goes on (a cancel is a wish, a
   * request a promise). `known`: the cancel read with the lease batch, if it was.
   */
  private async cancelled(
    job: Job,
    envelope: RequestEnvelope,
    progress: Progress,
    known?: { found: Cancellation | undefined },
  ): Promise<Settlement | undefined> {
    const { cancellations } = this.options;
    if (!cancellations) return undefined;
    const { client, proxyData } = envelope.meta;
    let cancellation = known?.found;
    if (!known) {
      const mark = cancellations.mark?.();
      cancellation = await cancellations.find(client, envelope.meta.requestId, job.task.createdAt).then(
        (found) => {
          // Read and absent: stands for the task's next checks while no cancel of it is announced.
          if (job.cancelRead) job.cancelRead.mark = found ? undefined : mark;
          return found;
        },
        (err: unknown) => {
          this.log.warn({ err, requestId: envelope.meta.requestId }, 'cancels not readable: going on');
          if (job.cancelRead) job.cancelRead.mark = undefined;
          return undefined;
        },
      );
    }
    if (!cancellation) return undefined;
    const result = cancelledResult(envelope.meta.requestId, cancellation, {
      tryCount: progress.tryCount,
      waitTimeNs: progress.waitedMs * 1e6,
      proxyData,
    });
    return deliver(withTraceId(ownedBy(envelope, result), envelope.meta.traceparent), 'cancelled');
  }

  /**
   * The one result of a request whose start-by deadline (`meta.deadline`) has passed, or would
   * before its next start (`stage`): `expired`, no further attempt, counted and journaled. Not
   * dead-lettered: the caller said the call is not worth making after the deadline, so a replay
   * could only expire again.
   */
  private expired(
    envelope: RequestEnvelope,
    progress: Progress,
    deadline: number,
    stage: 'queued' | 'retry' | 'wait',
  ): Settlement {
    const { requestId, client, proxyData } = envelope.meta;
    const at = new Date(deadline).toISOString();
    const why =
      stage === 'queued'
        ? 'before an attempt could start'
        : `before its next ${stage === 'retry' ? 'attempt' : 'start'} (after ${progress.tryCount} attempt(s))`;
    const result = errorResult(requestId, 'expired', `the deadline ${at} (meta.deadline) passed ${why}`, {
      tryCount: progress.tryCount,
      waitTimeNs: progress.waitedMs * 1e6,
      proxyData,
    });
    metrics.expired.inc({ stage });
    this.journal?.emit({
      type: 'expired',
      requestId,
      client,
      deadline,
      tryCount: progress.tryCount,
      stage,
    });
    return deliver(withTraceId(ownedBy(envelope, result), envelope.meta.traceparent), 'expired');
  }

  /**
   * A task of a paused origin, client or partition goes back to the queue unattempted (a wait: no
   * attempt, no limiter token, no breaker outcome; an ordered one keeps its partition's head) and
   * is looked at again after PAUSE_RECHECK_MS, or when the pause ends if sooner.
   */
  private paused(job: Job, envelope: RequestEnvelope): Settlement | undefined {
    const { pauses } = this.options;
    // Before the task's description is built: an object literal with a getter is a slow one.
    if (!pauses?.any) return undefined;
    const { uri } = envelope.request;
    let origin: [string | undefined] | undefined;
    const pause = pauses.match({
      // Parsed only when a pause is asked about: none recorded (the usual case) is no URL parse per call.
      get origin() {
        origin ??= [safeOrigin(uri)];
        return origin[0];
      },
      client: envelope.meta.client,
      partition: job.lease.partition,
      destination: envelope.meta.destination,
    });
    if (!pause) return undefined;
    const now = Date.now();
    const delayMs = Math.max(
      1,
      Math.ceil(Math.min(PAUSE_RECHECK_MS, (pause.until ?? Number.POSITIVE_INFINITY) - now)),
    );
    const seen = `${job.lease.id}\0${pause.scope} ${pause.value}`;
    if (this.journal && !this.pauseJournaled.has(seen)) {
      if (this.pauseJournaled.size >= 10_000) this.pauseJournaled.clear();
      this.pauseJournaled.add(seen);
      const until = pause.until === null ? '' : ` until ${new Date(pause.until).toISOString()}`;
      this.journal.emit({
        type: 'held',
        requestId: envelope.meta.requestId,
        client: envelope.meta.client,
        by: 'pause',
        until: pause.until ?? now + delayMs,
        pausedBy: `${pause.by}: ${pause.scope} ${pause.value}${until}`,
      });
    }
    return { kind: 'reschedule', delayMs, outcome: 'paused' };
  }

  /**
   * The lease, in the journal once the task's record is read: the event names the request's client,
   * which only the record tells (the task does not carry it), so its owner reads it in the story.
   */
  private journalLeased(job: Job, client: string | undefined): void {
    this.journal?.emit(this.leasedEvent(job, client));
  }

  private leasedEvent(job: Job, client: string | undefined): JournalEventInput {
    const { requestId, tryCount } = job.task;
    return { type: 'leased', requestId, client, executor: this.executorId, tryCount, at: Date.now() };
  }

  /**
   * An inline record this executor cannot read as a request (e.g. queued by a router of another
   * version): the record in Kafka is the truth, so it is read back and answered from there.
   */
  private async attemptFromKafka(job: Job): Promise<Settlement> {
    const { inline: _, ...task } = job.task;
    const [fetched] = await this.options.fetcher.fetchMany([task.ref]);
    return this.attempt({ ...job, task }, fetched);
  }

  /**
   * An `in` record that holds no valid request (it was changed or compacted under its offset, or a
   * router of another contract queued it): answered with the source offset, and dead-lettered.
   */
  private unprocessable(
    job: Job,
    record: { key: Buffer | null; value: Buffer | null },
    result: ResultEnvelope,
  ): Settlement {
    const source = job.task.ref;
    const sourced = sourcedResult(result, source);
    if (!this.options.topicDlq) return deliver(sourced, 'invalid_request');
    const reason = DEAD_LETTER_REASONS.unprocessable;
    const deadLetter = deadLetterMessage({ record, result: sourced, reason, source });
    return {
      kind: 'deliver',
      result: sourced,
      outcome: 'invalid_request',
      deadLetter,
      deadLetterReason: reason,
    };
  }

  /**
   * How an attempt's ending is carried out. A result is delivered, with its dead-letter record
   * when the request failed for good. A reschedule carries the task's new progress in its queued
   * payload; it waits in Redis (ordered partitions always: the task keeps the head and blocks its
   * partition), or, for an unordered task beyond the horizon, in the outbox as a full envelope.
   */
  private settlementOf(
    job: Job,
    envelope: RequestEnvelope,
    ending: Ending,
    uri = envelope.request.uri,
  ): Settlement {
    if (ending.kind === 'result') {
      const { label, deadLetter } = ending;
      // The trace id goes in before the dead letter copies the result: both must say the same.
      const result = withTraceId(ownedBy(envelope, ending.result), envelope.meta.traceparent);
      const { topicDlq } = this.options;
      if (!deadLetter || !topicDlq) return deliver(result, label);
      // The instant its deadline resolved to: a replay must not count a duration again from its own time.
      const letter = withDeadlineInstant(envelope, deadlineOf(job.task, envelope));
      const message = deadLetterMessage({
        envelope: letter,
        result,
        reason: deadLetter,
        source: job.task.ref,
      });
      return { kind: 'deliver', result, outcome: label, deadLetter: message, deadLetterReason: deadLetter };
    }
    const { delayMs, reason, progress } = ending;
    // A start after the deadline is no start: the task ends now rather than wait for nothing.
    const deadline = deadlineOf(job.task, envelope);
    if (deadline !== undefined && missesDeadline(deadline, Date.now() + delayMs))
      return this.expired(envelope, progress, deadline, reason === 'retry' ? 'retry' : 'wait');
    // The queue refuses such a delay for the whole reject batch: fail this task alone (internal result).
    if (!isQueueDelay(delayMs)) throw new RangeError(`cannot reschedule: ${delayMs} is not a delay in ms`);
    // A reserved pacing slot is the last wait's alone (progress says whether this one reserved one).
    const payload = encodeQueuedTask({
      ...job.task,
      pacedAt: undefined,
      ...progress,
      ...requeueTrace(envelope),
    });
    const { outbox, horizonMs = Number.POSITIVE_INFINITY } = this.options;
    const where = !outbox || placeOf(delayMs, job.lease.ordered, horizonMs) === 'redis' ? 'redis' : 'outbox';
    // Its journal event is written once the wait's place is known (see park).
    const { client } = envelope.meta;
    const retry = reason === 'retry' ? { requestId: job.task.requestId, client } : undefined;
    const bulkhead =
      reason === 'bulkhead'
        ? { requestId: job.task.requestId, client, uri, partition: linePartition(envelope.meta) }
        : undefined;
    if (!outbox || where === 'redis')
      return { kind: 'reschedule', delayMs, outcome: reason, payload, retry, bulkhead };
    const row = outboxRow(job.task, withDeadlineInstant(envelope, deadline), delayMs, progress);
    return { kind: 'reschedule', delayMs, outcome: reason, payload, outbox: row, retry, bulkhead };
  }

  /** A retry's `retry_scheduled`: where it waits, the queue, the outbox or parked in this executor. */
  private journalRetry(
    settlement: Settlement & { kind: 'reschedule' },
    where: 'redis' | 'outbox' | 'executor',
  ): void {
    const { retry, delayMs } = settlement;
    if (retry) this.journal?.emit({ type: 'retry_scheduled', ...retry, delayMs, where });
  }

  /**
   * A task's worker is free (a call settled, a wake-up read): it can take another lease. The loop
   * is woken once per turn of the event loop, so that the workers a batch frees together make one
   * lease call, not one each.
   */
  private workDone(): void {
    this.working--;
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.wakeSlotWaiters();
    });
  }

  /** A flush settled its batch: the freed slots and a readied partition wake the loop. */
  private flushed(): void {
    metrics.inFlight.set(this.held.size);
    this.flushes++;
    this.wakeSlotWaiters();
    this.idleWake?.abort();
  }

  /** Heartbeat: every held lease is pushed a TTL ahead, so long calls keep their tasks. */
  private async extendLeases(): Promise<void> {
    const tokens = [...this.held.keys()];
    if (tokens.length === 0) return;
    const sentAt = Date.now();
    try {
      const results = await this.options.queue.extendMany(
        tokens.map((token) => ({ token, leaseMs: this.options.leaseTtlMs })),
      );
      this.renewedAt = sentAt;
      const stale = tokens.filter((_, i) => results[i] === 'stale');
      for (const token of stale) if (this.held.has(token)) this.lost.add(token);
      if (stale.length > 0) this.log.warn({ stale: stale.length }, 'leases lost before their tasks finished');
    } catch (err) {
      this.log.warn({ err }, 'lease heartbeat failed');
    }
  }

  private slotFreed(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }

  private wakeSlotWaiters(): void {
    const waiters = this.slotWaiters;
    this.slotWaiters = [];
    for (const wake of waiters) wake();
  }
}

/**
 * The request's start-by deadline (epoch ms): as the router resolved it into the queued task, else
 * the instant its envelope names (a task queued without it, or an envelope whose duration only
 * its acceptance, `createdAt`, anchors).
 */
function deadlineOf(task: QueuedTask, envelope: RequestEnvelope): number | undefined {
  const { deadline } = envelope.meta;
  if (task.deadlineAt !== undefined || deadline === undefined) return task.deadlineAt;
  if (isDeadlineInstant(deadline)) return deadlineAt(deadline, 0);
  return task.createdAt === undefined ? undefined : deadlineAt(deadline, task.createdAt);
}

/**
 * What a parked task holds in memory, roughly: its `in` record (or the inline one in its queued
 * task) and its queued task as leased and as rewritten.
 */
function parkedBytes(job: Job, source: FetchOutcome | undefined, payload: string): number {
  const record = source?.ok ? (source.record.value?.length ?? 0) + (source.record.key?.length ?? 0) : 0;
  return record + job.lease.payload.length + payload.length;
}

/** The origin of a request's URL; none for a wake-up (or a URL the contract would refuse). */
function safeOrigin(uri: string | undefined): string | undefined {
  if (!uri) return undefined;
  try {
    return originOf(uri);
  } catch {
    return undefined;
  }
}

/**
 * A leased task's record as a request; none when the record was not read, or when an inline one
 * does not parse (attempt reads it back from Kafka then).
 */
function parseSource(
  contract: RequestContract,
  job: Job,
  fetched: FetchOutcome | undefined,
): Parsed | undefined {
  if (!fetched?.ok) return undefined;
  const { inline, requestId, tryCount } = job.task;
  if (!inline) return parseRecord(contract, fetched.record.value, requestId, tryCount);
  const parsed = inlineRequest(contract, inline, requestId, tryCount);
  return parsed.ok ? parsed : undefined;
}
