import type { FairQueue, LeasedTask } from '@requester/scheduler';
import {
  createRequestContract,
  decodeQueuedTask,
  encodeQueuedTask,
  errorResult,
  type Fetcher,
  type FetchOutcome,
  inSpan,
  invalidRequestResult,
  isWakeUp,
  type Logger,
  type Producer,
  produce,
  type QueuedTask,
  type RequestContract,
  type RequestEnvelope,
  type ResultEnvelope,
  wakeUpResult,
} from '@requester/shared';
import pLimit, { type LimitFunction } from 'p-limit';
import type { HttpClient } from '../http/index.ts';
import { toHttpCall } from '../http/request.ts';
import { executorMetrics as metrics, outcomeLabel } from '../metrics.ts';
import { callResult, resultMessage, unreadableResult } from '../result/index.ts';
import { type Classifier, deliverEveryOutcome } from './classify.ts';

/** What the executor needs of the queue (FairQueue provides it). */
export type TaskQueue = Pick<
  FairQueue,
  'lease' | 'extendMany' | 'ackMany' | 'rejectMany' | 'deadLetterMany' | 'waitForWork'
>;

export interface ExecutorOptions {
  queue: TaskQueue;
  fetcher: Pick<Fetcher, 'fetchMany'>;
  http: HttpClient;
  producer: Producer;
  topicOut: string;
  maxWorkers: number;
  leaseTtlMs: number;
  produceTimeoutMs: number;
  logger: Logger;
  classify?: Classifier;
  contract?: RequestContract;
}

/** How a task leaves this executor. */
type Settlement =
  | { kind: 'deliver'; result: ResultEnvelope; outcome: string }
  /** `payload`: the queued task rewritten to carry the attempts made (absent = no attempt made). */
  | { kind: 'retry'; delayMs: number; outcome: string; payload?: string }
  | { kind: 'dead'; reason: string };

interface Pending {
  lease: LeasedTask;
  settlement: Settlement;
  done: () => void;
}

type Parsed = { ok: true; envelope: RequestEnvelope } | { ok: false; result: ResultEnvelope };

interface Job {
  lease: LeasedTask;
  task: QueuedTask;
}

/** Shortest idle sleep: `nextWakeMs` may be 0 while nothing is leasable (e.g. a blocked partition). */
const MIN_IDLE_MS = 10;
/** Pause before a task whose record Kafka could not serve is tried again. */
const KAFKA_RETRY_MS = 1_000;

/**
 * The executor loop (DESIGN.md §3, §5). It holds at most `maxWorkers` leases; each turn it leases
 * as many tasks as it has free slots, reads their `in` records with one batched fetch, and runs the
 * calls (p-limit). Results are produced to `out` in batches — whatever finished while the previous
 * batch was being written goes out in one produce — and only then acked, so a crash between the
 * two replays the task (at-least-once) instead of losing its result. A slot is freed at the ack,
 * which is also what lets the next task of an ordered partition be leased: order at the target
 * follows from one-in-flight in the queue plus ack-after-produce here.
 */
export class Executor {
  private readonly options: ExecutorOptions;
  private readonly classify: Classifier;
  private readonly contract: RequestContract;
  private readonly log: Logger;
  private readonly limit: LimitFunction;
  private readonly held = new Map<string, LeasedTask>();
  private readonly batches = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private pending: Pending[] = [];
  private flushing: Promise<void> | undefined;
  private slotWaiters: Array<() => void> = [];
  private loop: Promise<void> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private idleWake: AbortController | undefined;
  /** Flushes completed so far: tells the loop that settlements happened while it was leasing. */
  private flushes = 0;

  constructor(options: ExecutorOptions) {
    this.options = options;
    this.classify = options.classify ?? deliverEveryOutcome;
    this.contract = options.contract ?? createRequestContract();
    this.log = options.logger.child({ component: 'executor' });
    this.limit = pLimit(options.maxWorkers);
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
    await this.flushing;
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
      const free = this.options.maxWorkers - this.held.size;
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
    for (const lease of leases) {
      const task = decode(lease.payload);
      if (task) jobs.push({ lease, task });
      else settled.push(this.settle(lease, { kind: 'dead', reason: 'queue payload is not a queued task' }));
    }
    const fetched = await this.options.fetcher.fetchMany(jobs.map((job) => job.task.ref));
    jobs.forEach((job, i) => {
      settled.push(
        this.limit(async () => {
          const settlement = await this.attempt(job, fetched[i]);
          await this.settle(job.lease, settlement);
        }),
      );
    });
    await Promise.all(settled);
  }

  /** Turns one task into its settlement; never throws (a bug becomes an `internal` error result). */
  private async attempt(job: Job, fetched: FetchOutcome | undefined): Promise<Settlement> {
    const { requestId } = job.task;
    // Attempts made, this one included. A retry rewrites the queued task with its count (see
    // `call`); a lease lost to a crash is not counted (the Idempotency-Key covers its duplicate).
    const tryCount = job.task.tryCount + 1;
    const log = this.log.child({ requestId });
    try {
      if (!fetched?.ok) {
        const error = fetched?.error;
        if (!error || error.code === 'dependency_unavailable') {
          log.warn({ err: error }, 'in-record not readable now; the task will be tried again');
          return { kind: 'retry', delayMs: KAFKA_RETRY_MS, outcome: 'kafka_unavailable' };
        }
        log.warn({ err: error }, 'in-record is gone: answering with an error result');
        return deliver(unreadableResult(requestId, error, job.task.tryCount), error.code);
      }
      const parsed = this.parse(fetched.record.value, requestId, job.task.tryCount);
      if (!parsed.ok) return deliver(parsed.result, 'invalid_request');
      const { envelope } = parsed;
      if (isWakeUp(envelope)) return deliver(wakeUpResult(envelope, { tryCount }), 'wake_up');
      return await this.call(envelope, job, tryCount, log);
    } catch (err) {
      log.error({ err }, 'executor failed on a task: answering with an internal error');
      const message = err instanceof Error ? err.message : String(err);
      return deliver(
        errorResult(requestId, 'internal', message, { tryCount: job.task.tryCount }),
        'internal',
      );
    }
  }

  /** The envelope of a record, or the invalid_request result answering it (keyed by the task's requestId). */
  private parse(value: Buffer | null, requestId: string, tryCount: number): Parsed {
    let input: unknown;
    try {
      input = JSON.parse(value?.toString('utf8') ?? '');
    } catch (err) {
      const message = `in-record is not JSON: ${err instanceof Error ? err.message : String(err)}`;
      return { ok: false, result: errorResult(requestId, 'invalid_request', message, { tryCount }) };
    }
    const parsed = this.contract.safeParse(input);
    if (parsed.ok) return { ok: true, envelope: parsed.value };
    const result = invalidRequestResult(input, parsed.error);
    result.meta.requestId ??= requestId;
    result.meta.tryCount = tryCount;
    return { ok: false, result };
  }

  private async call(
    envelope: RequestEnvelope,
    job: Job,
    tryCount: number,
    log: Logger,
  ): Promise<Settlement> {
    const attributes = { 'requester.request_id': envelope.meta.requestId, 'requester.try_count': tryCount };
    const outcome = await inSpan('executor.call', envelope.meta.traceparent, attributes, () =>
      this.options.http.call(toHttpCall(envelope)),
    );
    const label = outcomeLabel(outcome);
    metrics.httpSeconds.observe({ outcome: label }, outcome.durationNs / 1e9);
    if (outcome.kind === 'failure') log.warn({ err: outcome.error, tryCount }, 'call to the target failed');
    else log.debug({ status: outcome.status, tryCount }, 'target answered');
    const decision = this.classify({ envelope, outcome, tryCount, ordered: job.lease.ordered });
    if (decision.action === 'retry') {
      log.info({ delayMs: decision.delayMs, reason: decision.reason }, 'retrying later');
      const payload = encodeQueuedTask({ ...job.task, tryCount });
      return { kind: 'retry', delayMs: decision.delayMs, outcome: 'retry', payload };
    }
    return deliver(callResult(envelope, outcome, tryCount), label);
  }

  /** Queues the settlement for the next flush; resolves once it is written and the lease settled. */
  private settle(lease: LeasedTask, settlement: Settlement): Promise<void> {
    return new Promise((done) => {
      this.pending.push({ lease, settlement, done });
      this.flushSoon();
    });
  }

  private flushSoon(): void {
    if (this.flushing) return;
    this.flushing = (async () => {
      // One macrotask of grace so results finishing together share a produce.
      await new Promise((resolve) => setImmediate(resolve));
      while (this.pending.length > 0) {
        const batch = this.pending;
        this.pending = [];
        await this.flush(batch);
      }
    })().finally(() => {
      this.flushing = undefined;
      if (this.pending.length > 0) this.flushSoon();
    });
  }

  /**
   * Produces the results of the batch in one request, then acks their leases; retries and dead
   * letters are settled alongside. If `out` cannot be written within a lease TTL the tasks are
   * given back to the queue (tried again later) rather than acked without a result.
   */
  private async flush(batch: Pending[]): Promise<void> {
    const deliveries = batch.filter((p) => p.settlement.kind === 'deliver');
    const produced = await this.produceResults(deliveries);
    const acks: string[] = [];
    const rejects: Array<{ token: string; delayMs: number; payload?: string }> = [];
    const dead: Array<{ token: string; reason: string }> = [];
    for (const { lease, settlement } of batch) {
      if (settlement.kind === 'deliver' && produced) acks.push(lease.token);
      else if (settlement.kind === 'deliver') rejects.push({ token: lease.token, delayMs: KAFKA_RETRY_MS });
      else if (settlement.kind === 'retry') {
        const { delayMs, payload } = settlement;
        rejects.push({ token: lease.token, delayMs, ...(payload === undefined ? {} : { payload }) });
      } else dead.push({ token: lease.token, reason: settlement.reason });
    }
    const { queue } = this.options;
    await Promise.all([
      this.settleLeases('ack', acks, () => queue.ackMany(acks)),
      this.settleLeases('reject', rejects, () => queue.rejectMany(rejects)),
      this.settleLeases('dead-letter', dead, () => queue.deadLetterMany(dead)),
    ]);
    for (const { lease, settlement, done } of batch) {
      metrics.tasks.inc({ outcome: outcomeOf(settlement, produced) });
      this.held.delete(lease.token);
      done();
    }
    metrics.inFlight.set(this.held.size);
    this.flushes++;
    this.wakeSlotWaiters();
    this.idleWake?.abort();
  }

  /** true once every result is on `out`; retried with backoff for up to a lease TTL. */
  private async produceResults(deliveries: Pending[]): Promise<boolean> {
    const messages = deliveries.flatMap((p) =>
      p.settlement.kind === 'deliver' ? [resultMessage(p.settlement.result)] : [],
    );
    if (messages.length === 0) return true;
    const { producer, topicOut, produceTimeoutMs, leaseTtlMs } = this.options;
    const deadline = Date.now() + leaseTtlMs;
    for (let attempt = 1; ; attempt++) {
      try {
        await produce(producer, topicOut, messages, produceTimeoutMs);
        return true;
      } catch (err) {
        if (Date.now() >= deadline) {
          this.log.error(
            { err, results: messages.length },
            'cannot write results to out: giving the tasks back',
          );
          return false;
        }
        this.log.warn({ err, attempt }, 'writing results to out failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2_000)));
      }
    }
  }

  /** A few tries; if Redis stays away the leases lapse and the tasks are reclaimed (at-least-once). */
  private async settleLeases(what: string, items: unknown[], run: () => Promise<unknown>): Promise<void> {
    if (items.length === 0) return;
    for (let attempt = 1; attempt <= 3; attempt++) {
      try {
        await run();
        return;
      } catch (err) {
        this.log.warn({ err, attempt, leases: items.length }, `${what} failed`);
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  }

  /** Heartbeat: every held lease is pushed a TTL ahead, so long calls keep their tasks. */
  private async extendLeases(): Promise<void> {
    const tokens = [...this.held.keys()];
    if (tokens.length === 0) return;
    try {
      const results = await this.options.queue.extendMany(
        tokens.map((token) => ({ token, leaseMs: this.options.leaseTtlMs })),
      );
      const stale = tokens.filter((_, i) => results[i] === 'stale');
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

function deliver(result: ResultEnvelope, outcome: string): Settlement {
  return { kind: 'deliver', result, outcome };
}

function outcomeOf(settlement: Settlement, produced: boolean): string {
  if (settlement.kind === 'dead') return 'dead_letter';
  if (settlement.kind === 'deliver' && !produced) return 'out_unavailable';
  return settlement.outcome;
}

function decode(payload: string): QueuedTask | undefined {
  try {
    return decodeQueuedTask(payload);
  } catch {
    return undefined;
  }
}
