import {
  deadlineAt,
  decodeUtf8,
  defaultDeadlineAt,
  errorResult,
  invalidRequestResult,
  isOrderedPartition,
  kafkaKeyFor,
  notUtf8Result,
  type RequestContract,
  type RequestEnvelope,
  type ResultEnvelope,
  resolveDeadline,
  withDeadlineInstant,
  withDefaultDeadline,
} from '@requester/shared/contract';
import type { RecordBatchShape, RecordHeaders } from '@requester/shared/kafka';
import type { OutboxRow } from '@requester/shared/outbox';
import {
  encodeQueuedTask,
  type InlineRecord,
  inlineRecord,
  queuePartition,
  taskId,
} from '@requester/shared/task';
import { parseRfc3339 } from '@requester/shared/time';

/** A task for the Redis queue (the shape FairQueue.publish takes). */
export interface QueueTask {
  id: string;
  partition: string;
  payload: string;
  dueAt: number;
  /** `meta.priority` when not 0 (the queue's default). */
  priority?: number;
}

/** What the router does with one record of `in`. */
export type Route =
  | {
      kind: 'queue';
      task: QueueTask;
      envelope: RequestEnvelope;
      /** The span the task carries, for an outbox row of the same record (see fenceRoute). */
      traceparent?: string;
    }
  | { kind: 'outbox'; row: OutboxRow; envelope: RequestEnvelope }
  | { kind: 'invalid'; result: ResultEnvelope };

/**
 * Starts the trace span of a valid request being routed and returns its traceparent for the task
 * or outbox row to carry (undefined = carry nothing new).
 */
export type TraceRoute = (envelope: RequestEnvelope) => string | undefined;

export interface SourceRecord {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers?: RecordHeaders;
  /** The record's Kafka timestamp (epoch ms as a string): when it reached `in`. */
  timestamp?: string;
  /** Its record batch as consumed (see BodyCopies). */
  batch?: RecordBatchShape;
}

export interface RouteOptions {
  /** Epoch ms: what is due by then goes to the queue now. */
  now: number;
  /** How far ahead the Redis queue holds tasks; later ones wait in the outbox. */
  horizonMs: number;
  trace?: TraceRoute;
  /** Records of at most this many bytes ride in their queued task (QUEUE_INLINE_BYTES; 0 = none). */
  inlineMaxBytes?: number;
  /**
   * The due time of an outbox row the relay put back on `in` (its signed record's header), which
   * may lie ahead: the relay stages rows before they are due (RELAY_STAGE_AHEAD). Such a record is
   * queued for that instant (or its `meta.scheduled`, whichever is later) and never sent back to the
   * outbox, however far ahead: the relay chose to move it, and a second trip would only loop.
   */
  stagedDueAt?: number;
  /**
   * Whether Requester itself wrote the record (the ingress, the relay, a DLQ replay: signed), asked
   * only when its deadline fails the door's check: such a record's deadline was checked where it
   * entered, and one that has passed since (a replay after it) ends the task `expired` downstream
   * rather than refusing it as if a producer had just sent it.
   */
  signed?: () => boolean;
  /**
   * The operator's default deadlines of a record without `meta.deadline` (its Kafka-entry client's
   * key's, its destination's): Go durations counted from when it is first due, the earliest
   * binding (`defaultDeadlineAt`).
   */
  defaultDeadlines?: ReadonlyArray<string | undefined>;
}

/**
 * Decides where one `in` record goes (pure: no I/O). Due within `horizonMs` of `now` → the Redis
 * queue as an offset-ref (a small record rides along inline); due later → the PostgreSQL outbox
 * with the full record; unreadable or invalid → an error result.
 */
export function routeRecord(record: SourceRecord, contract: RequestContract, options: RouteOptions): Route {
  const { now, horizonMs, trace = () => undefined, inlineMaxBytes = 0, stagedDueAt, signed } = options;
  const { defaultDeadlines = [] } = options;
  const source = { topic: record.topic, partition: record.partition, offset: record.offset };
  if (!record.value || record.value.length === 0) {
    return invalid(
      errorResult(undefined, 'invalid_request', 'empty record: expected a JSON request envelope', { source }),
    );
  }
  const text = decodeUtf8(record.value);
  if (text === undefined) return invalid(notUtf8Result(lossyJson(record.value), source));
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch (err) {
    return invalid(
      errorResult(undefined, 'invalid_request', `invalid JSON: ${(err as Error).message}`, { source }),
    );
  }
  const parsed = contract.safeParse(input);
  if (!parsed.ok) {
    // Keyed by its requestId (and carrying its proxyData) when those are readable, so it finds its caller.
    const result = invalidRequestResult(input, parsed.error);
    if (result.meta.error) result.meta.error.source = source;
    return invalid(result);
  }
  // Only a request with a deadline, or a default one, needs its acceptance (a createdAt is parsed
  // for nothing otherwise).
  const dated = parsed.value.meta.deadline !== undefined || defaultDeadlines.length > 0;
  const accepted = dated ? acceptedAt(record, parsed.value, now) : now;
  const deadline = resolveDeadline(parsed.value.meta, accepted);
  if (!deadline.ok && !signed?.()) {
    const result = invalidRequestResult(input, deadline.error);
    if (result.meta.error) result.meta.error.source = source;
    return invalid(result);
  }
  const defaulted = defaultDeadlineAt(defaultDeadlines, parsed.value.meta, accepted);
  const deadlineAtMs = deadline.ok
    ? (deadline.at ?? defaulted)
    : deadlineAt(parsed.value.meta.deadline, accepted);
  const envelope = withDefaultDeadline(withDeadlineInstant(parsed.value, deadlineAtMs), defaulted);
  const scheduledAt = envelope.meta.scheduled ? parseRfc3339(envelope.meta.scheduled) : now;
  // A rescheduled task's outbox row carries its due time alone (its envelope keeps the caller's
  // `scheduled`, which has passed): the later of the two is when it runs.
  const dueAt = stagedDueAt === undefined ? scheduledAt : Math.max(scheduledAt, stagedDueAt);
  const traceparent = trace(envelope);
  if (
    stagedDueAt === undefined &&
    (dueAt - now > horizonMs || farOnArrival(record, envelope, scheduledAt, options))
  )
    return { kind: 'outbox', row: outboxRow(record, envelope, dueAt, traceparent), envelope };
  // The checked envelope rides inline, marked: the executor need not run the contract again.
  const inline = inlineRecord(envelope, record.value.length, record.headers, inlineMaxBytes);
  if (inline) inline.checked = true;
  return {
    kind: 'queue',
    task: queueTask(record, envelope, dueAt, traceparent, inline, deadlineAtMs),
    envelope,
    ...(traceparent === undefined ? {} : { traceparent }),
  };
}

/**
 * When the request was accepted, the instant a `meta.deadline` given as a duration counts from:
 * its `createdAt` when the service set one (the ingress's acceptance, kept by every copy that
 * comes back through the outbox), else the record's Kafka timestamp (when a direct producer's
 * record reached `in`: a router behind `in` does not lengthen the caller's deadline), never later
 * than now (a timestamp ahead is not believed), else now.
 */
export function acceptedAt(record: SourceRecord, envelope: RequestEnvelope, now: number): number {
  if (envelope.createdAt) return parseRfc3339(envelope.createdAt);
  const timestamp = Number(record.timestamp);
  return Number.isFinite(timestamp) && timestamp > 0 ? Math.min(timestamp, now) : now;
}

/**
 * The fence of an ordered partition (docs/architecture.md §9, "Ordered partitions and time"): set
 * while a record of the partition is in the outbox or on its way back through the relay, so that
 * the later records of the partition queue behind it instead of ahead of it.
 */
export interface Fence {
  /** Epoch ms: the latest due time of the partition's records sent to the outbox. */
  dueAt: number;
  /** The task id of the last of them: its relayed copy, once queued, lifts the fence. */
  last: string;
}

/**
 * Where a routed record of an ordered partition goes given its partition's fence, and the fence
 * after it (pure: the router reads the fences of a batch once, folds its records through this in
 * offset order, and writes the fences that changed). A record sent to the outbox fences its
 * partition, due no earlier than the fence; a record the queue would take while the partition is
 * fenced goes to the outbox too, behind the fence, and becomes its last; the relayed copy of the
 * fence's last lifts it (`relayed`: the record came back from the outbox). Other records, and
 * records of unordered partitions, pass unchanged.
 */
export function fenceRoute(
  record: SourceRecord,
  route: Route,
  fence: Fence | undefined,
  relayed: boolean,
): { route: Route; fence: Fence | undefined } {
  if (route.kind === 'invalid' || !isOrderedPartition(route.envelope.meta.partition)) return { route, fence };
  if (route.kind === 'queue') {
    if (relayed) return { route, fence: fence?.last === route.task.id ? undefined : fence };
    if (!fence) return { route, fence };
    const dueAt = Math.max(route.task.dueAt, fence.dueAt);
    const row = outboxRow(record, route.envelope, dueAt, route.traceparent);
    return { route: { kind: 'outbox', row, envelope: route.envelope }, fence: { dueAt, last: row.taskId } };
  }
  const dueAt = Math.max(route.row.dueAt.getTime(), fence?.dueAt ?? Number.NEGATIVE_INFINITY);
  const row = dueAt === route.row.dueAt.getTime() ? route.row : { ...route.row, dueAt: new Date(dueAt) };
  return { route: { ...route, row }, fence: { dueAt, last: row.taskId } };
}

/**
 * Whether a routed record enters its debounce key's burst (`meta.debounce`): a request as its
 * producer sent it, queued. A copy coming back (a relay's copy of an outbox row, a task the
 * executor rescheduled: attempts made or time waited) entered its burst already; the executor
 * decides whether it runs.
 */
export function entersDebounce(route: Route, relayed: boolean): boolean {
  if (route.kind !== 'queue' || relayed) return false;
  const { envelope } = route;
  return envelope.meta.debounce !== undefined && (envelope.tryCount ?? 0) === 0 && !envelope.waitTime;
}

/**
 * A debounced record's route once its burst gave it a due time (pure): queued for then, or, due
 * beyond the horizon, an outbox row for then (its relayed copy is queued without entering the
 * burst again, see entersDebounce).
 */
export function debounceRoute(
  record: SourceRecord,
  route: Extract<Route, { kind: 'queue' }>,
  dueAt: number,
  { now, horizonMs }: Pick<RouteOptions, 'now' | 'horizonMs'>,
): Route {
  if (dueAt - now > horizonMs)
    return {
      kind: 'outbox',
      row: outboxRow(record, route.envelope, dueAt, route.traceparent),
      envelope: route.envelope,
    };
  return { ...route, task: { ...route.task, dueAt } };
}

/**
 * An ordered record that was scheduled beyond the horizon when it reached `in` goes through the
 * outbox even when the router reads it later, within the horizon or after its instant (a router
 * behind `in`): otherwise the records of one ordered partition before it went to the outbox and the
 * ones after it to the queue, and those overtook the earlier ones still waiting in the outbox or on
 * their way back through the relay (docs/architecture.md §9, "Ordered partitions and time"). The
 * path of such a record is its own, not the router's pace: the same in every replay. Its arrival is
 * the record's Kafka timestamp, never later than now (a timestamp ahead is not believed).
 */
function farOnArrival(
  record: SourceRecord,
  envelope: RequestEnvelope,
  scheduledAt: number,
  { now, horizonMs }: RouteOptions,
): boolean {
  if (!envelope.meta.scheduled || !isOrderedPartition(envelope.meta.partition)) return false;
  const timestamp = Number(record.timestamp);
  if (!Number.isFinite(timestamp) || timestamp <= 0) return false;
  return scheduledAt - Math.min(timestamp, now) > horizonMs;
}

function queueTask(
  record: SourceRecord,
  envelope: RequestEnvelope,
  dueAt: number,
  traceparent: string | undefined,
  inline: InlineRecord | undefined,
  deadlineAt: number | undefined,
): QueueTask {
  const { requestId, partition, client } = envelope.meta;
  const tryCount = envelope.tryCount ?? 0;
  const createdAt = envelope.createdAt ? parseRfc3339(envelope.createdAt) : undefined;
  const waitedMs = waitedMsOf(envelope);
  return {
    id: taskIdOf(envelope),
    partition: queuePartition(client, partition, requestId),
    payload: encodeQueuedTask({
      ref: { topic: record.topic, partition: record.partition, offset: record.offset },
      requestId,
      tryCount,
      ...(createdAt === undefined ? {} : { createdAt }),
      ...(waitedMs === 0 ? {} : { waitedMs }),
      ...(traceparent === undefined ? {} : { traceparent }),
      ...(deadlineAt === undefined ? {} : { deadlineAt }),
      ...(inline === undefined ? {} : { inline }),
    }),
    dueAt,
    ...(envelope.meta.priority ? { priority: envelope.meta.priority } : {}),
  };
}

function outboxRow(
  record: SourceRecord,
  envelope: RequestEnvelope,
  dueAt: number,
  traceparent: string | undefined,
): OutboxRow {
  return {
    taskId: taskIdOf(envelope),
    requestId: envelope.meta.requestId,
    dueAt: new Date(dueAt),
    topic: record.topic,
    key: record.key?.toString('utf8') ?? kafkaKeyFor(envelope),
    payload: withMeta(record.value as Buffer, {
      ...(traceparent ? { traceparent } : {}),
      // The instant a duration resolved to: counted again from the relayed record, it would move.
      ...(envelope.meta.deadline ? { deadline: envelope.meta.deadline } : {}),
    }),
  };
}

/** A record that is not UTF-8, read with U+FFFD for each bad sequence: only to find whose it is. */
function lossyJson(value: Buffer): unknown {
  try {
    return JSON.parse(value.toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * The record's JSON with the given `meta` fields set (the record itself when there are none):
 * the outbox keeps no headers, so the router's span (`traceparent`) rides in the envelope to the
 * relay, which continues it, and so does a resolved `deadline`. Fields the contract does not know stay.
 */
function withMeta(value: Buffer, fields: Record<string, string>): Buffer {
  if (Object.keys(fields).length === 0) return value;
  const input = JSON.parse(value.toString('utf8')) as { meta: Record<string, unknown> };
  return Buffer.from(JSON.stringify({ ...input, meta: { ...input.meta, ...fields } }));
}

/**
 * The envelope's queue and outbox id, in its client's namespace (see taskId: a rescheduled request
 * comes back with a new one).
 */
function taskIdOf(envelope: RequestEnvelope): string {
  const { client, requestId } = envelope.meta;
  return taskId(client, requestId, envelope.tryCount ?? 0, waitedMsOf(envelope));
}

function waitedMsOf(envelope: RequestEnvelope): number {
  return envelope.waitTime ? Math.round(envelope.waitTime / 1e6) : 0;
}

function invalid(result: ResultEnvelope): Route {
  return { kind: 'invalid', result };
}
