/**
 * What the router puts in the Redis queue for one task, and what the executor reads back.
 *
 * Redis is a coordinator, not a document store (DESIGN.md §2): the task body stays in Kafka and the
 * queue holds an **offset-ref** to the `in` record. The ref also carries the few fields that change
 * without a new Kafka record (`tryCount` on a Redis retry), so a retry re-reads the same record.
 */
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
}

/** The queue's task id: `requestId:tryCount` — a replay of `in` publishes the same id and is refused. */
export function taskId(requestId: string, tryCount: number): string {
  return `${requestId}:${tryCount}`;
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
    throw new Error(`not a queued task: ${payload.slice(0, 200)}`);
  }
  const task: QueuedTask = {
    ref: { topic: wire.t, partition: wire.p, offset: wire.o },
    requestId: wire.r,
    tryCount: wire.n ?? 0,
  };
  if (wire.c !== undefined) task.createdAt = wire.c;
  if (wire.w !== undefined) task.waitedMs = wire.w;
  return task;
}
