import { hostname } from 'node:os';
import type { FairQueue, LeasedTask } from '@requester/queue';
import {
  clientScoped,
  createRequestContract,
  DEAD_LETTER_REASONS,
  deadLetterMessage,
  decodeQueuedTask,
  encodeQueuedTask,
  errorResult,
  type FetchedRecord,
  type Fetcher,
  type FetchOutcome,
  firstTraceparent,
  type InlineRecord,
  inSpan,
  invalidRequestResult,
  isMessageTooLargeError,
  type Journal,
  type KafkaProducer,
  type KafkaRef,
  kafkaAttributes,
  kafkaKeyFor,
  type Logger,
  msToNs,
  type Outbox,
  type OutboxRow,
  type OutgoingRecord,
  type QueuedTask,
  type RedisClient,
  type RequestContract,
  type RequestEnvelope,
  type ResultEnvelope,
  replyChannel,
  replyToHeader,
  resultKey,
  type Span,
  SpanKind,
  SpanStatusCode,
  sourcedResult,
  startSpan,
  taskId,
  traceIdOf,
  traceparentHeader,
  traceparentOf,
  tracingEnabled,
} from '@requester/shared';
import pLimit, { type LimitFunction } from 'p-limit';
import { executorMetrics as metrics } from '../metrics.ts';
import { ownedBy, resultMessage, tooLargeResultMessage, unreadableResult } from '../result/index.ts';
import { isQueueDelay, placeOf } from './decide.ts';
import { type Ending, Policies, type PolicyModules, type Progress } from './policies.ts';

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
  /** Where sync results are routed to their gateway (see `publishReplies`); none are without it. */
  replies?: ReplyOptions;
}

export interface ReplyOptions {
  redis: RedisClient;
  /** REDIS_PREFIX, without the colon. */
  prefix: string;
  /** SYNC_CACHE_TTL when sync results are also kept for long-polls (SYNC_FOLLOW_OUT=false). */
  keepMs?: number;
}

/** How a task leaves this executor. */
type Settlement =
  /** `deadLetter`: the DLQ record written in the same flush as the result. */
  | {
      kind: 'deliver';
      result: ResultEnvelope;
      outcome: string;
      deadLetter?: OutgoingRecord;
      deadLetterReason?: string;
      /** The attempt's span: the parent of the `out` PRODUCER span and the record's header. */
      traceparent?: string;
      /** The gateway waiting for this result (the `in` record's reply-to header). */
      replyTo?: string;
    }
  /**
   * Back to the queue for `delayMs`. `payload`: the queued task rewritten with its new progress
   * (absent = unchanged). `outbox`: wait in the outbox instead (then the lease is acked).
   */
  | { kind: 'reschedule'; delayMs: number; outcome: string; payload?: string; outbox?: OutboxRow }
  | { kind: 'dead'; reason: string };

interface Pending {
  lease: LeasedTask;
  settlement: Settlement;
  /** Epoch ms the request was accepted (the task's createdAt), for the end-to-end latency. */
  createdAt?: number | undefined;
  done: () => void;
}

type Parsed = { ok: true; envelope: RequestEnvelope } | { ok: false; result: ResultEnvelope };

interface Job {
  lease: LeasedTask;
  task: QueuedTask;
  /** Epoch ms when the lease was taken: where the task's queue wait ends. */
  leasedAt: number;
}

/** Shortest idle sleep: `nextWakeMs` may be 0 while nothing is leasable (e.g. a blocked partition). */
const MIN_IDLE_MS = 10;
/** Pause before a task whose record Kafka could not serve is tried again. */
const KAFKA_RETRY_MS = 1_000;

/**
 * The executor loop (docs/architecture.md §3, §5). It holds at most `maxWorkers` leases; each turn it leases
 * as many tasks as it has free slots, reads their `in` records with one batched fetch, and runs
 * each task's attempt under the delivery policies (p-limit; see policies.ts, decide.ts). Results
 * (and dead letters) are produced in batches — whatever finished while the previous batch was
 * being written goes out in one produce — and only then acked, so a crash between the two replays
 * the task (at-least-once) instead of losing its result. Rescheduled tasks go back to the queue
 * (rejected with their delay and progress) or to the outbox (then acked), in the same flush.
 * A slot is freed at the settlement, which is also what lets the next task of an ordered partition
 * be leased: order at the target follows from one-in-flight in the queue plus ack-after-produce.
 */
export class Executor {
  private readonly options: ExecutorOptions;
  private readonly policies: Policies;
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
  private readonly journal: Journal | undefined;
  private readonly executorId: string;

  constructor(options: ExecutorOptions) {
    this.options = options;
    this.policies = new Policies({ ...options, retryAfterMaxMs: options.retryAfterMaxMs ?? 3_600_000 });
    this.contract = options.contract ?? createRequestContract();
    this.log = options.logger.child({ component: 'executor' });
    this.limit = pLimit(options.maxWorkers);
    this.journal = options.journal;
    this.executorId = options.executorId ?? `${hostname()}/${process.pid}`;
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
    const leasedAt = Date.now();
    for (const lease of leases) {
      const task = decode(lease.payload);
      if (task) jobs.push({ lease, task, leasedAt });
      else settled.push(this.settle(lease, { kind: 'dead', reason: 'queue payload is not a queued task' }));
    }
    // Inline tasks carry their record; the others are read from `in` in one batched fetch.
    const reads = jobs.filter((job) => !job.task.inline);
    const read =
      reads.length > 0 ? await this.options.fetcher.fetchMany(reads.map((job) => job.task.ref)) : [];
    const fetched = new Map(reads.map((job, i) => [job, read[i]]));
    for (const job of jobs) {
      const source = job.task.inline ? inlineOutcome(job.task.ref, job.task.inline) : fetched.get(job);
      settled.push(
        this.limit(async () => {
          const settlement = withReplyTo(await this.attempt(job, source), source);
          await this.settle(job.lease, settlement, job.task.createdAt);
        }),
      );
    }
    await Promise.all(settled);
  }

  /** Turns one task into its settlement; never throws (a bug becomes an `internal` error result). */
  private async attempt(job: Job, fetched: FetchOutcome | undefined): Promise<Settlement> {
    const { requestId } = job.task;
    // Where the task stands. Every reschedule rewrites the queued task with its progress (see
    // settlementOf); a lease lost to a crash is not counted (the Idempotency-Key covers its duplicate).
    const progress: Progress = { tryCount: job.task.tryCount, waitedMs: job.task.waitedMs ?? 0 };
    const log = this.log.child({ requestId });
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
      const parsed = inline
        ? this.validate(inline.value, requestId, tryCount)
        : this.parse(fetched.record.value, requestId, tryCount);
      if (!parsed.ok && inline) return await this.attemptFromKafka(job);
      this.journalLeased(job, parsed.ok ? parsed.envelope.meta.client : undefined);
      if (!parsed.ok) return this.unprocessable(job, fetched.record, parsed.result);
      const { envelope } = parsed;
      const taskLog = envelope.meta.client ? log.child({ client: envelope.meta.client }) : log;
      return await this.traced(job, fetched.record, envelope, (traced) =>
        this.policies
          .attempt(traced, progress, taskLog)
          .then((ending) => this.settlementOf(job, traced, ending)),
      );
    } catch (err) {
      log.error({ err }, 'executor failed on a task: answering with an internal error');
      const message = err instanceof Error ? err.message : String(err);
      return deliver(
        errorResult(requestId, 'internal', message, { tryCount: job.task.tryCount }),
        'internal',
      );
    }
  }

  /**
   * The lease, in the journal once the task's record is read: the event names the request's client,
   * which only the record tells (the task does not carry it), so its owner reads it in the story.
   */
  private journalLeased(job: Job, client: string | undefined): void {
    const { requestId, tryCount } = job.task;
    this.journal?.emit({ type: 'leased', requestId, client, executor: this.executorId, tryCount });
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
   * Runs the attempt in its span, after recording the task's wait in the queue. The parent is the
   * span that queued the task (router, or the previous attempt), else the record's `traceparent`
   * header, else its `meta.traceparent`. The envelope handed on carries the attempt's span in
   * `meta.traceparent` (the CLIENT span and an outbox row continue it); a result carries the trace id.
   */
  private traced(
    job: Job,
    record: FetchedRecord,
    envelope: RequestEnvelope,
    run: (traced: RequestEnvelope) => Promise<Settlement>,
  ): Promise<Settlement> {
    const parent = firstTraceparent(
      job.task.traceparent,
      traceparentHeader(record.headers),
      envelope.meta.traceparent,
    );
    const { requestId } = envelope.meta;
    const attributes = { 'requester.request_id': requestId, 'requester.try_count': job.task.tryCount };
    startSpan('queue wait', parent, {
      // Dates, not numbers: a number before this process started would be read as performance time.
      startTime: new Date(Math.min(job.task.requeuedAt ?? job.lease.publishedAt, job.leasedAt)),
      attributes: { ...attributes, 'requester.deliveries': job.lease.deliveries },
    }).end(new Date(job.leasedAt));
    return inSpan('execute', parent, { attributes }, async (span) => {
      const traceparent = traceparentOf(span) ?? parent;
      const traced = traceparent ? { ...envelope, meta: { ...envelope.meta, traceparent } } : envelope;
      const settlement = await run(traced);
      // settlementOf put the trace id in the result already (the dead letter copies it from there).
      return settlement.kind === 'deliver' && traceparent ? { ...settlement, traceparent } : settlement;
    });
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

  /** The envelope of a record, or the invalid_request result answering it (keyed by the task's requestId). */
  private parse(value: Buffer | null, requestId: string, tryCount: number): Parsed {
    let input: unknown;
    try {
      input = JSON.parse(value?.toString('utf8') ?? '');
    } catch (err) {
      const message = `in-record is not JSON: ${err instanceof Error ? err.message : String(err)}`;
      return { ok: false, result: errorResult(requestId, 'invalid_request', message, { tryCount }) };
    }
    return this.validate(input, requestId, tryCount);
  }

  /** `parse` for a value already parsed from JSON (an inline task's). */
  private validate(input: unknown, requestId: string, tryCount: number): Parsed {
    const parsed = this.contract.safeParse(input);
    if (parsed.ok) return { ok: true, envelope: parsed.value };
    const result = invalidRequestResult(input, parsed.error);
    result.meta.requestId ??= requestId;
    result.meta.tryCount = tryCount;
    return { ok: false, result };
  }

  /**
   * How an attempt's ending is carried out. A result is delivered, with its dead-letter record
   * when the request failed for good. A reschedule carries the task's new progress in its queued
   * payload; it waits in Redis (ordered partitions always: the task keeps the head and blocks its
   * partition), or, for an unordered task beyond the horizon, in the outbox as a full envelope.
   */
  private settlementOf(job: Job, envelope: RequestEnvelope, ending: Ending): Settlement {
    if (ending.kind === 'result') {
      const { label, deadLetter } = ending;
      // The trace id goes in before the dead letter copies the result: both must say the same.
      const result = withTraceId(ownedBy(envelope, ending.result), envelope.meta.traceparent);
      const { topicDlq } = this.options;
      if (!deadLetter || !topicDlq) return deliver(result, label);
      const message = deadLetterMessage({ envelope, result, reason: deadLetter, source: job.task.ref });
      return { kind: 'deliver', result, outcome: label, deadLetter: message, deadLetterReason: deadLetter };
    }
    const { delayMs, reason, progress } = ending;
    // The queue refuses such a delay for the whole reject batch: fail this task alone (internal result).
    if (!isQueueDelay(delayMs)) throw new RangeError(`cannot reschedule: ${delayMs} is not a delay in ms`);
    const payload = encodeQueuedTask({ ...job.task, ...progress, ...requeueTrace(envelope) });
    const { outbox, horizonMs = Number.POSITIVE_INFINITY } = this.options;
    const where = !outbox || placeOf(delayMs, job.lease.ordered, horizonMs) === 'redis' ? 'redis' : 'outbox';
    if (reason === 'retry')
      this.journal?.emit({
        type: 'retry_scheduled',
        requestId: job.task.requestId,
        client: envelope.meta.client,
        delayMs,
        where,
      });
    if (!outbox || where === 'redis') return { kind: 'reschedule', delayMs, outcome: reason, payload };
    const row = outboxRow(job.task, envelope, delayMs, progress);
    return { kind: 'reschedule', delayMs, outcome: reason, payload, outbox: row };
  }

  /** Queues the settlement for the next flush; resolves once it is written and the lease settled. */
  private settle(lease: LeasedTask, settlement: Settlement, createdAt?: number): Promise<void> {
    return new Promise((done) => {
      this.pending.push({ lease, settlement, createdAt, done });
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
   * Produces the results of the batch (and their dead-letter records) in one go and writes the
   * outbox rows, then settles the leases: delivered and outboxed tasks are acked, rescheduled ones
   * rejected with their delay and new payload, dead ones dead-lettered in the queue. If `out`
   * cannot be written within a lease TTL the tasks are given back to the queue (tried again later)
   * rather than acked without a result; if the outbox cannot be written the wait stays in Redis.
   */
  private async flush(batch: Pending[]): Promise<void> {
    const deliveries = batch.filter((p) => p.settlement.kind === 'deliver');
    const rows = batch.flatMap((p) => (p.settlement.kind === 'reschedule' && p.settlement.outbox) || []);
    const [written, outboxed] = await Promise.all([this.produceResults(deliveries), this.addToOutbox(rows)]);
    const produced = written !== undefined;
    if (produced) observeProduced(deliveries, Date.now());
    const acks: string[] = [];
    const rejects: Array<{ token: string; delayMs: number; payload?: string }> = [];
    const dead: Array<{ token: string; reason: string }> = [];
    for (const { lease, settlement } of batch) {
      const { token } = lease;
      if (settlement.kind === 'deliver') {
        if (produced) acks.push(token);
        else rejects.push({ token, delayMs: KAFKA_RETRY_MS });
      } else if (settlement.kind === 'reschedule') {
        const { delayMs, payload, outbox } = settlement;
        if (outbox && outboxed) acks.push(token);
        else rejects.push({ token, delayMs, ...(payload === undefined ? {} : { payload }) });
      } else dead.push({ token, reason: settlement.reason });
    }
    if (produced) for (const { settlement } of deliveries) this.journalDelivered(settlement);
    const { queue } = this.options;
    await Promise.all([
      written && this.publishReplies(written),
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

  private journalDelivered(settlement: Settlement): void {
    if (!this.journal || settlement.kind !== 'deliver') return;
    const { response, meta } = settlement.result;
    const requestId = meta.requestId;
    if (!requestId) return;
    const client = meta.client;
    const error = meta.error?.code;
    this.journal.emit({
      type: 'completed',
      requestId,
      client,
      status: response.status,
      tryCount: meta.tryCount,
      ...(error ? { error } : {}),
    });
    const reason = settlement.deadLetterReason;
    if (reason !== undefined) this.journal.emit({ type: 'dead_lettered', requestId, client, reason });
  }

  /**
   * The results as written, once every result is on `out` and every dead letter on the DLQ
   * (`undefined` when that failed); retried for up to a lease TTL.
   */
  private async produceResults(deliveries: Pending[]): Promise<Written[] | undefined> {
    const results: ResultEnvelope[] = [];
    const traceparents: Array<string | undefined> = [];
    const replyTos: Array<string | undefined> = [];
    const deadLetters: OutgoingRecord[] = [];
    for (const { settlement } of deliveries) {
      if (settlement.kind !== 'deliver') continue;
      results.push(settlement.result);
      traceparents.push(settlement.traceparent);
      replyTos.push(settlement.replyTo);
      if (settlement.deadLetter) deadLetters.push(settlement.deadLetter);
    }
    if (results.length === 0) return [];
    const { producer, topicDlq, produceTimeoutMs, leaseTtlMs } = this.options;
    const deadline = Date.now() + leaseTtlMs;
    for (let attempt = 1; ; attempt++) {
      try {
        const [values] = await Promise.all([
          this.writeResults(results, traceparents),
          topicDlq ? producer.send(topicDlq, deadLetters, produceTimeoutMs) : undefined,
        ]);
        return values.map((value, i) => ({
          value,
          replyTo: replyTos[i],
          requestId: results[i]?.meta.requestId,
          client: results[i]?.meta.client,
        }));
      } catch (err) {
        if (Date.now() >= deadline) {
          this.log.error(
            { err, results: results.length },
            'cannot write results to out: giving the tasks back',
          );
          return undefined;
        }
        this.log.warn({ err, attempt }, 'writing results to out failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2_000)));
      }
    }
  }

  /**
   * Writes results to `out`. If the broker refuses the batch as too large — the topic's limit can
   * be below KAFKA_MAX_MESSAGE_BYTES when it was created elsewhere — each result is written on its
   * own, and the ones still refused are answered as too large: one oversized result must neither
   * hold back the results of its batch nor be retried forever. Returns each record's value as written.
   */
  private async writeResults(
    results: ResultEnvelope[],
    traceparents: Array<string | undefined>,
  ): Promise<Array<OutgoingRecord['value']>> {
    const { producer, topicOut, produceTimeoutMs, maxResultBytes } = this.options;
    const spans = traceparents.map((parent) => sendSpan(topicOut, parent));
    const messages = results.map((result, i) =>
      withTraceHeader(resultMessage(result, maxResultBytes), spans[i]),
    );
    try {
      await producer.send(topicOut, messages, produceTimeoutMs);
      endAll(spans);
      return messages.map((message) => message.value);
    } catch (err) {
      endAll(spans, err);
      if (!isMessageTooLargeError(err)) throw err;
    }
    return await Promise.all(
      results.map(async (result, i) => {
        const message = messages[i] as OutgoingRecord;
        try {
          await producer.send(topicOut, [message], produceTimeoutMs);
          return message.value;
        } catch (err) {
          if (!isMessageTooLargeError(err)) throw err;
          const refused = 'was refused by the out topic as too large (its max.message.bytes)';
          this.log.warn({ requestId: result.meta.requestId }, 'result too large for out: answering 502');
          const tooLarge = tooLargeResultMessage(result, refused);
          await producer.send(topicOut, [tooLarge], produceTimeoutMs);
          return tooLarge.value;
        }
      }),
    );
  }

  /**
   * Hands the sync results just written to `out` to the gateways holding their callers (SPUBLISH on
   * each one's channel) and, when long-polls need them, keeps them in Redis for `keepMs`. The
   * commands of one flush go out together (the client's auto-pipelining, per node on a cluster).
   * Best effort: `out` stays the journal, and a caller whose gateway is gone or that Redis failed
   * gets the usual 202 + Location.
   */
  private async publishReplies(written: Written[]): Promise<void> {
    const { replies } = this.options;
    if (!replies) return;
    const { redis, prefix, keepMs } = replies;
    const sends: Array<Promise<unknown>> = [];
    for (const { value, replyTo, requestId, client } of written) {
      if (!replyTo || value === null) continue;
      sends.push(redis.spublish(replyChannel(prefix, replyTo), value));
      // Kept by result id, as gateways look it up: the requestId in its client's namespace.
      if (keepMs !== undefined && requestId)
        sends.push(redis.set(resultKey(prefix, clientScoped(client, requestId)), value, 'PX', keepMs));
    }
    const failed = (await Promise.allSettled(sends)).find((s) => s.status === 'rejected');
    if (failed) this.log.warn({ err: failed.reason }, 'sync replies not published: their callers get 202');
  }

  /** true once the rows are in the outbox; one try (on failure the waits stay in Redis instead). */
  private async addToOutbox(rows: OutboxRow[]): Promise<boolean> {
    if (rows.length === 0) return true;
    try {
      await this.options.outbox?.add(rows);
      return true;
    } catch (err) {
      this.log.warn({ err, rows: rows.length }, 'outbox unavailable: the waits stay in Redis');
      return false;
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

/** The PRODUCER span of one result written to `out`; none for a result outside any trace. */
function sendSpan(topic: string, parent: string | undefined): Span | undefined {
  if (!parent || !tracingEnabled()) return undefined;
  return startSpan(`send ${topic}`, parent, {
    kind: SpanKind.PRODUCER,
    attributes: kafkaAttributes('send', topic),
  });
}

/** The record with the `traceparent` header of its PRODUCER span: the sync-gateway continues it. */
function withTraceHeader(record: OutgoingRecord, span: Span | undefined): OutgoingRecord {
  const traceparent = span && traceparentOf(span);
  return traceparent ? { ...record, headers: { ...record.headers, traceparent } } : record;
}

function endAll(spans: Array<Span | undefined>, err?: unknown): void {
  for (const span of spans) {
    if (err) span?.setStatus({ code: SpanStatusCode.ERROR, message: String(err) });
    span?.end();
  }
}

/** A result as written to `out`, with the gateway waiting for it. */
interface Written {
  value: OutgoingRecord['value'];
  replyTo: string | undefined;
  requestId: string | undefined;
  client: string | undefined;
}

/** A delivery carries its `in` record's reply-to header (only a record read can have one). */
function withReplyTo(settlement: Settlement, fetched: FetchOutcome | undefined): Settlement {
  if (settlement.kind !== 'deliver' || !fetched?.ok) return settlement;
  const replyTo = replyToHeader(fetched.record.headers);
  return replyTo ? { ...settlement, replyTo } : settlement;
}

/**
 * An inline task's record, as if read from `in`, for its headers: the value rides parsed in the
 * task (attempt validates it from there), and the key only a record read back needs.
 */
function inlineOutcome(ref: KafkaRef, inline: InlineRecord): FetchOutcome {
  const record = { ref, key: null, value: null, headers: inline.headers ?? {}, timestamp: '' };
  return { ok: true, record };
}

function deliver(result: ResultEnvelope, outcome: string): Settlement {
  return { kind: 'deliver', result, outcome };
}

/** End-to-end latency (measured when the result is on `out`, before the ack) and dead letters written. */
function observeProduced(deliveries: Pending[], nowMs: number): void {
  for (const { settlement, createdAt } of deliveries) {
    if (settlement.kind !== 'deliver') continue;
    if (createdAt !== undefined)
      metrics.endToEndSeconds.observe({ outcome: settlement.outcome }, Math.max(0, nowMs - createdAt) / 1000);
    if (settlement.deadLetterReason) metrics.deadLetters.inc({ reason: settlement.deadLetterReason });
  }
}

/** The result with the trace id of `traceparent` (unchanged without one, or when it has it). */
function withTraceId(result: ResultEnvelope, traceparent: string | undefined): ResultEnvelope {
  const traceId = traceIdOf(traceparent);
  if (!traceId || result.meta.traceId === traceId) return result;
  return { ...result, meta: { ...result.meta, traceId } };
}

/** What a task put back carries for its next queue wait and attempt (nothing while tracing is off). */
function requeueTrace(envelope: RequestEnvelope): Pick<QueuedTask, 'traceparent' | 'requeuedAt'> {
  const { traceparent } = envelope.meta;
  return tracingEnabled() && traceparent ? { traceparent, requeuedAt: Date.now() } : {};
}

function outcomeOf(settlement: Settlement, produced: boolean): string {
  if (settlement.kind === 'dead') return 'dead_letter';
  if (settlement.kind === 'deliver' && !produced) return 'out_unavailable';
  return settlement.outcome;
}

/**
 * The outbox row of an unordered task waiting beyond the horizon: its full envelope, carrying the
 * attempts made and the time waited (the router reads them back), due when the wait ends. Its id
 * is new (see taskId), so neither the outbox nor the queue's dedup window refuses it.
 */
function outboxRow(
  task: QueuedTask,
  envelope: RequestEnvelope,
  delayMs: number,
  progress: Progress,
): OutboxRow {
  const { tryCount, waitedMs } = progress;
  const copy: RequestEnvelope = {
    ...envelope,
    tryCount,
    ...(waitedMs > 0 ? { waitTime: msToNs(waitedMs) } : {}),
  };
  return {
    taskId: taskId(envelope.meta.client, task.requestId, tryCount, waitedMs),
    requestId: task.requestId,
    dueAt: new Date(Date.now() + delayMs),
    topic: task.ref.topic,
    key: kafkaKeyFor(envelope),
    payload: Buffer.from(JSON.stringify(copy)),
  };
}

function decode(payload: string): QueuedTask | undefined {
  try {
    return decodeQueuedTask(payload);
  } catch {
    return undefined;
  }
}
