import type { Cancellation } from '@requester/shared/cancel';
import {
  errorResult,
  isWakeUp,
  type RequestContract,
  type RequestEnvelope,
} from '@requester/shared/contract';
import type { DestinationCatalog } from '@requester/shared/destinations';
import type { Journal, JournalEventInput } from '@requester/shared/journal';
import type { FetchedRecord, Fetcher, FetchOutcome } from '@requester/shared/kafka';
import { type LazyChild, type Logger, lazyChild } from '@requester/shared/log';
import type { Granted } from '../bulkhead/index.ts';
import { unreadableResult } from '../result/index.ts';
import { missesDeadline } from './decide.ts';
import { prepareDestination, withApplied } from './destination.ts';
import { deadlineOf, type Outcomes } from './outcomes.ts';
import type { Policies, Progress } from './policies.ts';
import type { PreChecks } from './prechecks.ts';
import { deliver, type Job, KAFKA_RETRY_MS, type Settlement } from './settlement.ts';
import { inlineRequest, type Parsed, parseRecord } from './source.ts';
import { traced } from './trace.ts';

/** How recent a lease's cancel read stands for a task woken with a bulkhead slot (see attemptParsed). */
const CANCEL_FRESH_MS = 1_000;

/** What a task's run needs (see ExecutorOptions; the parts are the executor's). */
export interface TaskRunnerParts {
  contract: RequestContract;
  fetcher: Pick<Fetcher, 'fetchMany'>;
  policies: Policies;
  preChecks: PreChecks;
  endings: Outcomes;
  destinations: Pick<DestinationCatalog, 'current'> | undefined;
  journal: Journal | undefined;
  /** Names this executor in the journal's `leased` events. */
  executorId: string;
  log: Logger;
}

/**
 * One task's way from its record to its settlement: the record read as a request, its pre-checks
 * (cancel, deadline, destination, pause), the attempt under the policies (policies.ts), and its
 * outcome turned into the settlement (outcomes.ts). Never throws: a bug becomes an `internal` result.
 */
export class TaskRunner {
  private readonly parts: TaskRunnerParts;
  private readonly log: Logger;

  constructor(parts: TaskRunnerParts) {
    this.parts = parts;
    this.log = parts.log;
  }

  /**
   * Turns one task into its settlement; never throws (a bug becomes an `internal` error result).
   * `read`: its record parsed and its cancel looked up with its lease batch (else both are done here).
   */
  async attempt(
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
          ? inlineRequest(this.parts.contract, inline, requestId, tryCount)
          : parseRecord(this.parts.contract, fetched.record.value, requestId, tryCount));
      if (!parsed.ok && inline) return await this.attemptFromKafka(job);
      // A wake-up's `leased` goes with its result's `completed`, so both are one journal record (one
      // per request and flush; apart, about every other wake-up of a drain made two); the event
      // keeps the lease's time. A parked task was not leased again: its story has one `leased` for
      // both of its gates.
      const meta = parsed.ok ? parsed.envelope.meta : undefined;
      if (!parked && parsed.ok && isWakeUp(parsed.envelope)) {
        const leased = this.leasedEvent(job, meta);
        const settlement = await this.attemptParsed(
          job,
          fetched.record,
          parsed.envelope,
          progress,
          log,
          read,
          slot,
        ).catch((err: unknown) => {
          this.parts.journal?.emit(leased); // its `internal` result goes without it
          throw err;
        });
        if (settlement.kind === 'deliver') return { ...settlement, leased };
        this.parts.journal?.emit(leased);
        return settlement;
      }
      if (!parked) this.journalLeased(job, meta);
      if (!parsed.ok) return this.parts.endings.unprocessable(job, fetched.record, parsed.result);
      return await this.attemptParsed(
        job,
        fetched.record,
        parsed.envelope,
        progress,
        log,
        read,
        slot,
        parked,
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

  /** attempt, once the task's record is read as a request (and its `leased` journaled or held). */
  private async attemptParsed(
    job: Job,
    record: FetchedRecord,
    envelope: RequestEnvelope,
    progress: Progress,
    log: LazyChild,
    read: { parsed: Parsed; cancellation: Cancellation | undefined } | undefined,
    slot: Granted | undefined,
    parked = false,
  ): Promise<Settlement> {
    const known = read
      ? { found: read.cancellation }
      : this.parts.preChecks.knownCancel(
          job,
          envelope,
          slot !== undefined && Date.now() - job.leasedAt < CANCEL_FRESH_MS,
        );
    const cancelled = await this.parts.preChecks.cancelled(job, envelope, progress, known);
    if (cancelled) return cancelled;
    const deadline = deadlineOf(job.task, envelope);
    if (deadline !== undefined && missesDeadline(deadline, this.parts.endings.now()))
      return this.parts.endings.expired(envelope, progress, deadline, 'queued');
    // Before any wait (a pause's too): a task back from one does not ask again. A parked task asked
    // when it was leased.
    const debounced = parked ? undefined : await this.parts.preChecks.debounced(envelope, progress);
    if (debounced) return debounced;
    // The policies see the call its destination makes of the request; the settlement (outbox row,
    // dead letter) keeps the request as sent, so that it is resolved again when it comes back.
    const prepared = await prepareDestination(this.parts.destinations, envelope, progress.tryCount);
    if (prepared.kind === 'settled') return prepared.settlement;
    const paused = this.parts.preChecks.paused(
      job,
      prepared.kind === 'call' ? prepared.call(envelope) : envelope,
    );
    if (paused) return paused;
    const taskLog: LazyChild = envelope.meta.client ? log.with({ client: envelope.meta.client }) : log;
    // The origin a bulkhead wait is for is the one called.
    const callUri = (traced: RequestEnvelope) =>
      prepared.kind === 'call' ? prepared.call(traced).request.uri : traced.request.uri;
    const attempt = (traced: RequestEnvelope) =>
      prepared.kind === 'as-is'
        ? this.parts.policies.attempt(traced, progress, taskLog, slot)
        : this.parts.policies
            .attempt(prepared.call(traced), progress, taskLog, slot, prepared.gates)
            .then((ending) => withApplied(ending, prepared.applied));
    return await traced(job, record, envelope, (traced) =>
      attempt(traced).then((ending) =>
        // Cancelled while in flight: the attempt made stands, no further one (nor a wait) follows.
        ending.kind === 'reschedule'
          ? this.parts.preChecks
              .cancelled(job, traced, ending.progress, this.parts.preChecks.knownCancel(job, traced, false))
              .then(
                (late) =>
                  late ??
                  this.parts.endings.settlementOf(
                    job,
                    traced,
                    ending,
                    callUri(traced),
                    prepared.kind !== 'call' || prepared.gates.pacing,
                  ),
              )
          : this.parts.endings.settlementOf(job, traced, ending),
      ),
    );
  }

  /**
   * The lease, in the journal once the task's record is read: the event names the request's client,
   * which only the record tells (the task does not carry it), so its owner reads it in the story;
   * and what decided when it ran — its priority, concurrency key and debounce key — each only when
   * the request has one, so that an event without them costs no more than before.
   */
  private journalLeased(job: Job, meta: RequestEnvelope['meta'] | undefined): void {
    this.parts.journal?.emit(this.leasedEvent(job, meta));
  }

  private leasedEvent(job: Job, meta: RequestEnvelope['meta'] | undefined): JournalEventInput {
    const { requestId, tryCount } = job.task;
    const { priority } = job.lease;
    const event: JournalEventInput = {
      type: 'leased',
      requestId,
      client: meta?.client,
      executor: this.parts.executorId,
      tryCount,
      at: Date.now(),
    };
    if (priority) event.priority = priority;
    if (meta?.concurrency) event.concurrencyKey = meta.concurrency.key;
    if (meta?.debounce) event.debounceKey = meta.debounce.key;
    return event;
  }

  /**
   * An inline record this executor cannot read as a request (e.g. queued by a router of another
   * version): the record in Kafka is the truth, so it is read back and answered from there.
   */
  private async attemptFromKafka(job: Job): Promise<Settlement> {
    const { inline: _, ...task } = job.task;
    const [fetched] = await this.parts.fetcher.fetchMany([task.ref]);
    return this.attempt({ ...job, task }, fetched);
  }
}

/**
 * A leased task's record as a request; none when the record was not read, or when an inline one
 * does not parse (attempt reads it back from Kafka then).
 */
export function parseSource(
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
