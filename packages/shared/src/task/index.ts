/**
 * What the router puts in the Redis queue for one task, and what the executor reads back.
 *
 * Redis is a coordinator, not a document store (docs/architecture.md §2): the task body stays in Kafka and the
 * queue holds an **offset-ref** to the `in` record. The ref also carries the few fields that change
 * without a new Kafka record (`tryCount` on a Redis retry), so a retry re-reads the same record.
 *
 * @module
 */

import { RequesterError } from '../errors/index.ts';

export interface KafkaRef {
  topic: string;
  partition: number;
  /** Kafka offsets are int64: kept as a decimal string. */
  offset: string;
}

export interface QueuedTask {
  ref: KafkaRef;
  requestId: string;
  /** Attempts already made before this one (0 for a first attempt). */
  tryCount: number;
  /** Epoch ms when the original request was accepted (for waitTime/latency). */
  createdAt?: number;
  /** Ms already spent waiting for rate limits or an open breaker (reported as waitTime). */
  waitedMs?: number;
  /**
   * W3C traceparent of the span that queued the task (router, or the executor's attempt before a
   * retry): the parent of the queue wait and of the next attempt. Only while tracing is on.
   */
  traceparent?: string;
  /** Epoch ms when the executor put the task back (a retry or a wait): where its queue wait starts. */
  requeuedAt?: number;
}

/**
 * The queue's task id: `requestId:tryCount`, plus `:w<waitedMs>` once the task has waited for a
 * rate limit or an open breaker. A replay of `in` publishes the same id and is refused. A task the
 * executor sends through the outbox comes back with a new id: a retry has one attempt more, and a
 * wait (no attempt) has waited longer — without that part its id would be the one just acked,
 * which the dedup window refuses, and the task would be lost.
 */
export function taskId(requestId: string, tryCount: number, waitedMs = 0): string {
  return waitedMs > 0 ? `${requestId}:${tryCount}:w${waitedMs}` : `${requestId}:${tryCount}`;
}

/**
 * The queue partition of a request: its `meta.partition` when given (a `!` prefix makes it
 * ordered), else its own requestId (an unordered partition of one).
 */
export function queuePartition(partition: string | undefined, requestId: string): string {
  return partition && partition.length > 0 ? partition : `#${requestId}`;
}

// Short keys: this JSON is stored once per queued task in Redis, so every byte counts at 1M tasks.
interface WireTask {
  t: string;
  p: number;
  o: string;
  r: string;
  n: number;
  c?: number;
  w?: number;
  /** traceparent without its `00-` version prefix. */
  x?: string;
  q?: number;
}

export function encodeQueuedTask(task: QueuedTask): string {
  const wire: WireTask = {
    t: task.ref.topic,
    p: task.ref.partition,
    o: task.ref.offset,
    r: task.requestId,
    n: task.tryCount,
  };
  if (task.createdAt !== undefined) wire.c = task.createdAt;
  if (task.waitedMs) wire.w = task.waitedMs;
  if (task.traceparent?.startsWith('00-')) wire.x = task.traceparent.slice(3);
  if (task.requeuedAt !== undefined) wire.q = task.requeuedAt;
  return JSON.stringify(wire);
}

export function decodeQueuedTask(payload: string): QueuedTask {
  const wire = JSON.parse(payload) as WireTask;
  if (
    typeof wire.t !== 'string' ||
    typeof wire.p !== 'number' ||
    typeof wire.o !== 'string' ||
    typeof wire.r !== 'string'
  ) {
    throw new RequesterError('internal', `not a queued task: ${payload.slice(0, 200)}`);
  }
  const task: QueuedTask = {
    ref: { topic: wire.t, partition: wire.p, offset: wire.o },
    requestId: wire.r,
    tryCount: wire.n ?? 0,
  };
  if (wire.c !== undefined) task.createdAt = wire.c;
  if (wire.w !== undefined) task.waitedMs = wire.w;
  if (typeof wire.x === 'string') task.traceparent = `00-${wire.x}`;
  if (typeof wire.q === 'number') task.requeuedAt = wire.q;
  return task;
}
