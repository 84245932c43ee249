/**
 * What the router puts in the Redis queue for one task, and what the executor reads back.
 *
 * Redis is a coordinator, not a document store (docs/architecture.md §2): the task holds an
 * **offset-ref** to the `in` record, and the few fields that change without a new Kafka record
 * (`tryCount` on a Redis retry). A small record (QUEUE_INLINE_BYTES) also rides in the task itself,
 * so the executor need not read it back from Kafka: that read is a round trip and a record-batch
 * decode per lease batch, more than the bytes cost in Redis below the bound.
 *
 * @module
 */

import { clientScoped } from '../contract/namespace.ts';
import { RequesterError } from '../errors/index.ts';
import { headerText, type KafkaRef, type RecordHeaders } from '../kafka/types.ts';
import { REPLY_TO_HEADER } from '../replies/index.ts';

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
  /**
   * The dispatch slot its origin's pacer reserved for it when it sent the task back to wait (Redis
   * epoch ms): coming back at that time, it goes without taking another slot (OriginPacer).
   */
  pacedAt?: number;
  /**
   * Epoch ms of the request's start-by deadline (`meta.deadline`) as the door resolved it: the
   * `in` record of a direct producer may hold a duration, which only its acceptance anchors.
   */
  deadlineAt?: number;
  /** The `in` record itself, when it is small enough to ride in the task (the ref stays the truth). */
  inline?: InlineRecord;
  /**
   * The topic the request entered by (`in`) when `ref` points at the router's copy of its record
   * on the bodies topic (docs/architecture.md §9, "Big records from outside producers"): a task
   * sent back through the outbox goes back there, not to the copy's topic, which nobody consumes.
   */
  entryTopic?: string;
}

/** What the executor reads of an `in` record: its value, and the headers it acts on. */
export interface InlineRecord {
  /**
   * The record's value as parsed JSON (the router parsed it already). It is written into the task
   * as JSON, not as a string of JSON: no escaping, so the task grows by the value's own bytes.
   */
  value: unknown;
  /** The record's headers the executor acts on (`traceparent`, `requester-reply-to`), when present. */
  headers?: Record<string, string>;
  /**
   * The value is the request envelope as the router's contract check returned it (defaults
   * applied), not the raw record: the executor takes it without checking it again. Absent
   * (an older router's task): the executor validates it.
   */
  checked?: true;
}

/** Headers of an `in` record that the executor reads, and so an inline task must carry. */
export const INLINE_HEADERS = ['traceparent', REPLY_TO_HEADER] as const;

/**
 * The record as an inline task carries it, when its value (`input`, parsed from `valueBytes`
 * bytes) is at most `maxBytes` (0: never). Only the headers of INLINE_HEADERS are kept; the key
 * is not (only a record the executor cannot parse needs it, and that one is read back from Kafka).
 */
export function inlineRecord(
  input: unknown,
  valueBytes: number,
  headers: RecordHeaders | undefined,
  maxBytes: number,
): InlineRecord | undefined {
  if (valueBytes === 0 || valueBytes > maxBytes) return undefined;
  const inline: InlineRecord = { value: input };
  for (const name of INLINE_HEADERS) {
    const text = headerText(headers, name);
    if (text === undefined) continue;
    inline.headers ??= {};
    inline.headers[name] = text;
  }
  return inline;
}

/**
 * The queue's task id: `requestId:tryCount`, plus `:w<waitedMs>` once the task has waited for a
 * rate limit or an open breaker, in the namespace of the request's client (`clientScoped`: another
 * client's requestId is another task). A replay of `in` publishes the same id and is refused. A
 * task the executor sends through the outbox comes back with a new id: a retry has one attempt
 * more, and a wait (no attempt) has waited longer — without that part its id would be the one
 * just acked, which the dedup window refuses, and the task would be lost.
 */
export function taskId(
  client: string | undefined,
  requestId: string,
  tryCount: number,
  waitedMs = 0,
): string {
  const id = waitedMs > 0 ? `${requestId}:${tryCount}:w${waitedMs}` : `${requestId}:${tryCount}`;
  return clientScoped(client, id);
}

/**
 * The queue partition of a request: its `meta.partition` when given (a `!` prefix makes it
 * ordered), else its own requestId (an unordered partition of one), in the namespace of its
 * client: two clients' `!order-42` are two partitions, neither waits behind the other's head.
 */
export function queuePartition(
  client: string | undefined,
  partition: string | undefined,
  requestId: string,
): string {
  return clientScoped(client, partition && partition.length > 0 ? partition : `#${requestId}`);
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
  /** pacedAt */
  s?: number;
  /** deadlineAt */
  d?: number;
  /** The inline record's value (JSON as is), and its headers. */
  v?: unknown;
  h?: Record<string, string>;
  /** 1: `v` is the router's checked envelope (InlineRecord.checked). */
  k?: 1;
  /** entryTopic */
  e?: string;
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
  if (task.pacedAt !== undefined) wire.s = task.pacedAt;
  if (task.deadlineAt !== undefined) wire.d = task.deadlineAt;
  if (task.entryTopic !== undefined) wire.e = task.entryTopic;
  if (task.inline) {
    wire.v = task.inline.value;
    if (task.inline.headers) wire.h = task.inline.headers;
    if (task.inline.checked) wire.k = 1;
  }
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
  if (typeof wire.s === 'number') task.pacedAt = wire.s;
  if (typeof wire.d === 'number') task.deadlineAt = wire.d;
  if (typeof wire.e === 'string') task.entryTopic = wire.e;
  if (wire.v !== undefined) {
    task.inline = { value: wire.v };
    if (isStringRecord(wire.h)) task.inline.headers = wire.h;
    if (wire.k === 1) task.inline.checked = true;
  }
  return task;
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((v) => typeof v === 'string')
  );
}
