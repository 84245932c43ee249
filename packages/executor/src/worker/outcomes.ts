import {
  DEAD_LETTER_REASONS,
  deadLetterMessage,
  deadlineAt,
  errorResult,
  isDeadlineInstant,
  type RequestEnvelope,
  type ResultEnvelope,
  sourcedResult,
  withDeadlineInstant,
} from '@requester/shared/contract';
import type { Journal } from '@requester/shared/journal';
import type { FetchedRecord } from '@requester/shared/kafka';
import type { Outbox } from '@requester/shared/outbox';
import { encodeQueuedTask, type QueuedTask } from '@requester/shared/task';
import { linePartition } from '../bulkhead/index.ts';
import { executorMetrics as metrics } from '../metrics.ts';
import { ownedBy } from '../result/index.ts';
import { isQueueDelay, missesDeadline, placeOf } from './decide.ts';
import type { Outcome, Progress } from './policies.ts';
import { deliver, type Job, outboxRow, type Settlement } from './settlement.ts';
import { requeueTrace, withTraceId } from './trace.ts';

/** What turning endings into settlements needs of the executor's wiring (see ExecutorOptions). */
export interface OutcomeOptions {
  topicDlq?: string;
  outbox?: Pick<Outbox, 'add'>;
  horizonMs?: number;
  journal?: Journal;
  /** Epoch ms on Redis's clock (RedisClock.now): start-by deadlines are judged by it; Date.now without. */
  redisNow?: () => number;
}

/**
 * How a task's attempt ends for the queue: its outcome (a result, a retry or a wait) turned into
 * the settlement the flush carries out (settle.ts), with the task's journal events of it.
 */
export class Outcomes {
  private readonly options: OutcomeOptions;

  constructor(options: OutcomeOptions) {
    this.options = options;
  }

  /**
   * Now by the clock start-by deadlines are judged by: Redis's, as for due times and leases, so that
   * an executor whose clock is off neither expires a task early nor starts it past its deadline.
   */
  now(): number {
    return this.options.redisNow?.() ?? Date.now();
  }

  /**
   * The one result of a request whose start-by deadline (`meta.deadline`) has passed, or would
   * before its next start (`stage`): `expired`, no further attempt, counted and journaled. Not
   * dead-lettered: the caller said the call is not worth making after the deadline, so a replay
   * could only expire again.
   */
  expired(
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
    this.options.journal?.emit({
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
   * An `in` record that holds no valid request (it was changed or compacted under its offset, or a
   * router of another contract queued it): answered with the source offset, and dead-lettered.
   */
  unprocessable(job: Job, record: Pick<FetchedRecord, 'key' | 'value'>, result: ResultEnvelope): Settlement {
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
  settlementOf(
    job: Job,
    envelope: RequestEnvelope,
    ending: Outcome,
    uri = envelope.request.uri,
    paced = true,
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
    if (deadline !== undefined && missesDeadline(deadline, this.now() + delayMs))
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
    const by: 'bulkhead' | 'concurrency' | undefined =
      reason === 'bulkhead' || reason === 'concurrency' ? reason : undefined;
    const bulkhead = by && {
      requestId: job.task.requestId,
      client,
      uri,
      partition: linePartition(envelope.meta),
      by,
      ...(paced ? {} : { unpaced: true as const }),
      ...(ending.concurrencyKey ? { concurrencyKey: ending.concurrencyKey } : {}),
    };
    if (!outbox || where === 'redis')
      return { kind: 'reschedule', delayMs, outcome: reason, payload, retry, bulkhead };
    const row = outboxRow(job.task, withDeadlineInstant(envelope, deadline), delayMs, progress);
    return { kind: 'reschedule', delayMs, outcome: reason, payload, outbox: row, retry, bulkhead };
  }

  /** A retry's `retry_scheduled`: where it waits, the queue, the outbox or parked in this executor. */
  journalRetry(
    settlement: Settlement & { kind: 'reschedule' },
    where: 'redis' | 'outbox' | 'executor',
  ): void {
    const { retry, delayMs } = settlement;
    if (retry) this.options.journal?.emit({ type: 'retry_scheduled', ...retry, delayMs, where });
  }
}

/**
 * The request's start-by deadline (epoch ms): as the router resolved it into the queued task, else
 * the instant its envelope names (a task queued without it, or an envelope whose duration only
 * its acceptance, `createdAt`, anchors).
 */
export function deadlineOf(task: QueuedTask, envelope: RequestEnvelope): number | undefined {
  const { deadline } = envelope.meta;
  if (task.deadlineAt !== undefined || deadline === undefined) return task.deadlineAt;
  if (isDeadlineInstant(deadline)) return deadlineAt(deadline, 0);
  return task.createdAt === undefined ? undefined : deadlineAt(deadline, task.createdAt);
}
