import type { LeasedTask } from '@requester/queue';
import { kafkaKeyFor, type RequestEnvelope, type ResultEnvelope } from '@requester/shared/contract';
import type { JournalEventInput } from '@requester/shared/journal';
import type { OutgoingRecord } from '@requester/shared/kafka';
import type { OutboxRow } from '@requester/shared/outbox';
import type { AnnouncementMark } from '@requester/shared/redis';
import { type QueuedTask, taskId } from '@requester/shared/task';
import { msToNs } from '@requester/shared/time';
import type { SlotKey } from './decide.ts';
import type { Progress } from './policies.ts';

/** How a task leaves this executor. */
export type Settlement =
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
      /**
       * A wake-up's `leased` journal event (its `at` the lease's), written with its `completed`
       * (see TaskRunner.attempt).
       */
      leased?: JournalEventInput;
    }
  /**
   * Back to the queue for `delayMs`. `payload`: the queued task rewritten with its new progress
   * (absent = unchanged). `outbox`: wait in the outbox instead (then the lease is acked).
   */
  | {
      kind: 'reschedule';
      delayMs: number;
      outcome: string;
      payload?: string;
      outbox?: OutboxRow;
      /** A retry: its `retry_scheduled` journal event is written where the wait's place is decided. */
      retry?: { requestId: string; client: string | undefined };
      /**
       * A bulkhead refusal: the task may wait parked for a slot of its request's origin (see
       * ParkingLot.parkForSlot), and its `held` journal event is written once that is decided.
       */
      bulkhead?: {
        requestId: string;
        client: string | undefined;
        uri: string;
        partition: string;
        /** What the slot is of: the origin's bulkhead, or the request's concurrency key. */
        by: 'bulkhead' | 'concurrency';
        /** Its destination switched pacing off: the slot is under the fixed cap, not the learnt one. */
        unpaced?: true;
        /** `concurrency`: the key (and its limit) that refused the task, whose slot it waits for. */
        concurrencyKey?: SlotKey;
      };
    }
  | { kind: 'dead'; reason: string };

/** A leased task and its queued form, as the executor works on it. */
export interface Job {
  lease: LeasedTask;
  task: QueuedTask;
  /** Epoch ms when the lease was taken: where the task's queue wait ends. */
  leasedAt: number;
  /**
   * Where the cancel watch stood when the task's cancel was last read and found absent (see
   * Cancellations.mark): shared by the copies of the job made as it goes on, so a read done for one
   * of its attempts stands for the next while no cancel of it is announced.
   */
  cancelRead?: { mark: AnnouncementMark | undefined };
}

/** Pause before a task whose record Kafka could not serve is tried again. */
export const KAFKA_RETRY_MS = 1_000;

export function deliver(result: ResultEnvelope, outcome: string): Settlement {
  return { kind: 'deliver', result, outcome };
}

/**
 * The outbox row of an unordered task waiting beyond the horizon: its full envelope, carrying the
 * attempts made and the time waited (the router reads them back), due when the wait ends. Its id
 * is new (see taskId), so neither the outbox nor the queue's dedup window refuses it.
 */
export function outboxRow(
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
    topic: task.entryTopic ?? task.ref.topic,
    key: kafkaKeyFor(envelope),
    payload: Buffer.from(JSON.stringify(copy)),
  };
}
