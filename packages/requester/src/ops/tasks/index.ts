import { originOf } from '@requester/policies';
import type { ListedTask, QueueAdmin, TaskListFilter, TaskListState } from '@requester/queue';
import {
  Cancellations,
  type Config,
  cancelRequest,
  clientScoped,
  decodeQueuedTask,
  type Fetcher,
  type Journal,
  type Logger,
  Outbox,
  type RedisClient,
  type Sql,
  tryParseDuration,
  tryParseRfc3339,
  UsageError,
  type WaitingFilter,
} from '@requester/shared';
import { type AdminActionEvent, recordAdminAction } from '../audit.ts';
import { originArg } from '../breakers/index.ts';
import { isoTime } from '../format.ts';
import { redactUrl } from '../redact.ts';
import { CANCELLABLE_STATES, type CancellableState, type TaskState } from './states.ts';

export * from './states.ts';

/**
 * Lists by state (issue 22): pending, scheduled, in flight and dead tasks, from the Redis queue
 * (QueueAdmin.listTasks) and, for scheduled ones, the PostgreSQL outbox, filtered and one page at
 * a time, never the whole list in memory; and the bulk cancel of a selection, preview first.
 * Behind `requester tasks <state>`, `/admin/api/tasks/<state>` and the Tasks page. URLs are
 * redacted (../redact.ts) as in every view of requests.
 */
export interface ScheduledFilter {
  /** The API key name; '' = requests without a client; absent = every client. */
  client?: string;
  dueAfter?: string;
  dueBefore?: string;
}

function waitingFilter(filter: ScheduledFilter): WaitingFilter {
  return {
    ...(filter.client === undefined ? {} : { client: filter.client === '' ? null : filter.client }),
    ...(filter.dueAfter ? { dueAfter: instant('due-after', filter.dueAfter) } : {}),
    ...(filter.dueBefore ? { dueBefore: instant('due-before', filter.dueBefore) } : {}),
  };
}

export interface CancelParts extends TaskListParts {
  redis: RedisClient;
  config: Pick<Config, 'redisPrefix' | 'cancelRetention'>;
  logger: Logger;
  journal?: Journal;
  journalAdminAction?: (event: AdminActionEvent) => Promise<void>;
}

export interface BulkCancelOutcome {
  /** What the selection matched when counted (the preview), or walked (the act). */
  matched: number;
  /** Cancels this run recorded first. */
  cancelled: number;
  /** Matches cancelled before (an earlier run, the owner, another operator): left as they were. */
  already: number;
  preview: boolean;
}

/** Rows per page of a bulk action's walk: its memory bound. */
const BULK_PAGE = 200;

/**
 * Cancels every task of a state a selection matches (each as `requester cancel` does), or without
 * `confirm` only counts them: the preview ("N tasks match"). A selection is required (no "all").
 *
 * Bounded in memory: it walks the list a page at a time (BULK_PAGE rows), cancels that page, and
 * records that page's requestIds as one operator action (`tasks.cancel`) before the next; nothing
 * grows with the selection but two counters. Resumable by rerunning, no checkpoint needed: a
 * cancel is idempotent (the first one wins, `SET NX`; asking again changes nothing and counts as
 * `already`), a cancelled outbox row is woken and leaves the outbox, and a cancelled queued task is
 * answered `cancelled` by the executor when it comes up, once. So a run that dies halfway is
 * finished by running it again: what it cancelled counts as `already`, the rest is cancelled, and
 * no request gets two results.
 */
export async function cancelMatching(
  parts: CancelParts,
  actor: string,
  state: CancellableState,
  filter: TaskFilter,
  confirm: boolean,
  onProgress?: (done: number, total: number) => void,
  pageSize = BULK_PAGE,
): Promise<BulkCancelOutcome> {
  if (!CANCELLABLE_STATES.includes(state))
    throw new UsageError(`cancel takes ${CANCELLABLE_STATES.join(', ')} tasks, not ${state}`);
  const selected = Object.entries(filter).some(
    ([key, value]) => value !== undefined && (value !== '' || key === 'client'),
  );
  if (!selected)
    throw new UsageError(
      'cancelling tasks needs a selection: client, origin, partition, due-after, due-before or older-than',
    );
  const outcome: BulkCancelOutcome = { matched: 0, cancelled: 0, already: 0, preview: !confirm };
  if (!confirm) {
    await walk(parts, state, filter, pageSize, async (rows) => {
      outcome.matched += rows.length;
      onProgress?.(outcome.matched, 0);
    });
    return outcome;
  }
  const where = {
    cancellations: new Cancellations(parts.redis, parts.config.redisPrefix, parts.config.cancelRetention),
    outbox: async () => new Outbox(await parts.sql()),
    ...(parts.journal ? { journal: parts.journal } : {}),
  };
  await walk(parts, state, filter, pageSize, async (rows) => {
    const own = rows.filter((row) => row.requestId !== null);
    const outcomes = await Promise.all(
      own.map((row) => cancelRequest(where, row.client ?? undefined, row.requestId as string, actor)),
    );
    const first = outcomes.filter((o) => o.first);
    outcome.matched += rows.length;
    outcome.cancelled += first.length;
    outcome.already += outcomes.length - first.length;
    if (first.length > 0)
      await recordAdminAction(
        parts.logger,
        {
          action: 'tasks.cancel',
          actor,
          target: { state, selection: filter, requestIds: first.map((o) => o.requestId) },
          outcome: 'done',
        },
        parts.journalAdminAction,
      );
    onProgress?.(outcome.matched, 0);
  });
  return outcome;
}

/** Walks a whole list a page at a time, each page handled before the next is read. */
async function walk(
  parts: TaskListParts,
  state: TaskState,
  filter: TaskFilter,
  pageSize: number,
  each: (rows: TaskRow[]) => Promise<void>,
): Promise<void> {
  let cursor: string | undefined;
  for (;;) {
    const page = await tasksPage(parts, state, filter, pageSize, cursor);
    if (page.rows.length > 0) await each(page.rows);
    if (page.next === null) return;
    cursor = page.next;
  }
}

function instant(name: string, text: string): number {
  const parsed = tryParseRfc3339(text);
  if (!parsed.ok) throw new UsageError(`--${name}: ${parsed.message}`);
  return parsed.epochMs;
}

function safeOrigin(uri: string | null): string | null {
  if (!uri) return null;
  try {
    return originOf(uri);
  } catch {
    return null;
  }
}

const QUEUE_STATE: Record<TaskState, TaskListState> = {
  pending: 'due',
  scheduled: 'later',
  'in-flight': 'leased',
  dead: 'dead',
};

/** A list's selection, in its textual form (CLI options, query parameters, a form). */
export interface TaskFilter extends ScheduledFilter {
  /** Requests to this origin (or any URL on it). */
  origin?: string;
  /** The request's `meta.partition`; with no client, `<partition> @<client>` names a client's. */
  partition?: string;
  /** Tasks first queued (outbox: added) longer ago than this duration (e.g. 10m): an age filter. */
  olderThan?: string;
}

export interface TaskRow {
  state: TaskState;
  /** Where it waits: the Redis queue or the PostgreSQL outbox. */
  store: 'redis' | 'outbox';
  taskId: string;
  requestId: string | null;
  client: string | null;
  /** The queue's partition name (client namespace included); the outbox: the request's. */
  partition: string | null;
  shard: number | null;
  dueAt: string | null;
  /** First queued (Redis) or added to the outbox. */
  queuedAt: string | null;
  tryCount: number | null;
  /** Its start-by deadline (`meta.deadline`, resolved at acceptance); null without one or unknown. */
  deadline: string | null;
  /** Its `meta.priority` in the queue (0: the default); null in the outbox (not read there). */
  priority: number | null;
  /** Its `meta.debounce` key (only its burst's latest runs); null without one or unreadable. */
  debounce: string | null;
  /** Its `meta.concurrency` (at most `limit` calls of `key` in flight); null without one or unreadable. */
  concurrency: { key: string; limit: number } | null;
  /** Leases so far (Redis). */
  deliveries: number | null;
  /** in-flight: when its lease runs out (then the task is reclaimed and leased again). */
  leaseExpiresAt: string | null;
  /** in-flight: the lease token (its shard, sequence and delivery; the queue keeps no executor name). */
  leaseToken: string | null;
  deadAt: string | null;
  reason: string | null;
  origin: string | null;
  /** The request's URL, redacted; null when it could not be read (the `in` record aged out). */
  uri: string | null;
}

/** A task's concurrency key as the CLI and UI tables show it: `key (limit N)`; null without one. */
export function concurrencyText(concurrency: TaskRow['concurrency']): string | null {
  return concurrency === null ? null : `${concurrency.key} (limit ${concurrency.limit})`;
}

export interface TaskPage {
  rows: TaskRow[];
  /** The following page's cursor; null: the list is done. A page may be short (a filter) yet have one. */
  next: string | null;
}

export interface TaskListParts {
  queueAdmin: () => QueueAdmin;
  sql: () => Promise<Sql>;
  /** Reads `in` records by offset: the URL of a queued task whose request is not inline. */
  inRecords?: Pick<Fetcher, 'fetchMany'>;
}

/**
 * One page of a state's tasks, filtered. Never the whole list: the Redis part walks one shard's
 * set a bounded step at a time (QueueAdmin.listTasks), the outbox part is a keyset query, and a
 * page holds at most `limit` rows. The cursor is opaque: `r.<queue cursor>` while in Redis,
 * `o.<outbox cursor>` in the outbox (scheduled only, after Redis). The origin filter needs the
 * request's URL, read per page: it may make pages short.
 */
export async function tasksPage(
  parts: TaskListParts,
  state: TaskState,
  filter: TaskFilter,
  limit: number,
  cursor?: string,
): Promise<TaskPage> {
  if (!Number.isInteger(limit) || limit < 1 || limit > 1_000)
    throw new UsageError(`limit must be 1…1000, got ${limit}`);
  const selection = selectionOf(filter);
  const phase = cursor ? cursor.slice(0, 2) : 'r.';
  if (phase !== 'r.' && !(phase === 'o.' && state === 'scheduled'))
    throw new UsageError('cursor: not a cursor of this list');
  const rest = cursor?.slice(2) || undefined;
  if (phase === 'o.') return outboxPage(parts, selection, limit, rest);
  const page = await parts
    .queueAdmin()
    .listTasks(QUEUE_STATE[state], selection.queue, limit, rest)
    .catch(cursorError);
  const rows = await queueRows(parts, state, page.tasks, selection.origin);
  if (page.next !== null) return { rows, next: `r.${page.next}` };
  if (state !== 'scheduled') return { rows, next: null };
  // Redis is done: the outbox follows (in the same page while there is room).
  if (rows.length >= limit) return { rows, next: 'o.' };
  const outbox = await outboxPage(parts, selection, limit - rows.length, undefined);
  return { rows: [...rows, ...outbox.rows], next: outbox.next };
}

interface Selection {
  queue: TaskListFilter;
  outbox: WaitingFilter;
  origin?: string;
}

function selectionOf(filter: TaskFilter): Selection {
  let client = filter.client;
  let partition = filter.partition;
  // `!order-42 @billing` without --client: billing's partition (the queue's own name for it).
  const at = partition?.lastIndexOf(' @') ?? -1;
  if (partition !== undefined && client === undefined && at > 0) {
    client = partition.slice(at + 2);
    partition = partition.slice(0, at);
  }
  const from = filter.dueAfter ? instant('due-after', filter.dueAfter) : undefined;
  const to = filter.dueBefore ? instant('due-before', filter.dueBefore) : undefined;
  const before = filter.olderThan ? Date.now() - duration('older-than', filter.olderThan) : undefined;
  const queue: TaskListFilter = {
    ...(client === undefined ? {} : { client }),
    ...(partition ? { partition: clientScoped(client || undefined, partition) } : {}),
    ...(from === undefined ? {} : { from }),
    ...(to === undefined ? {} : { to }),
    ...(before === undefined ? {} : { publishedBefore: before }),
  };
  const outbox: WaitingFilter = {
    ...waitingFilter({ ...filter, ...(client === undefined ? {} : { client }) }),
    ...(partition ? { partition } : {}),
    ...(before === undefined ? {} : { addedBefore: before }),
  };
  return { queue, outbox, ...(filter.origin ? { origin: originArg(filter.origin, 'filter') } : {}) };
}

async function outboxPage(
  parts: TaskListParts,
  selection: Selection,
  limit: number,
  cursor: string | undefined,
): Promise<TaskPage> {
  const page = await new Outbox(await parts.sql()).page(selection.outbox, limit, cursor).catch(cursorError);
  const rows: TaskRow[] = page.rows.map((r) => ({
    state: 'scheduled',
    store: 'outbox',
    taskId: r.taskId,
    requestId: r.requestId,
    client: r.client,
    partition: r.partition,
    shard: null,
    dueAt: isoTime(r.dueAt),
    queuedAt: isoTime(r.addedAt),
    tryCount: tryCountOf(r.taskId),
    deadline: r.deadline,
    priority: null,
    debounce: r.debounce,
    concurrency: r.concurrency,
    deliveries: null,
    leaseExpiresAt: null,
    leaseToken: null,
    deadAt: null,
    reason: null,
    origin: safeOrigin(r.uri),
    uri: r.uri === null ? null : redactUrl(r.uri),
  }));
  return {
    rows: rows.filter((row) => !selection.origin || row.origin === selection.origin),
    next: page.next === null ? null : `o.${page.next}`,
  };
}

/** The rows of queued tasks, their requests' URLs read (inline, else from `in`), the origin filter applied. */
async function queueRows(
  parts: TaskListParts,
  state: TaskState,
  tasks: ListedTask[],
  origin: string | undefined,
): Promise<TaskRow[]> {
  const decoded = tasks.map((task) => safeDecode(task.payload));
  const requests = await requestFacts(decoded, parts.inRecords);
  const rows = tasks.map((task, i): TaskRow => {
    const queued = decoded[i];
    const uri = requests[i]?.uri ?? null;
    const at = task.partition.lastIndexOf(' @');
    return {
      state,
      store: 'redis',
      taskId: task.id,
      requestId: queued?.requestId ?? null,
      client: at < 0 ? null : task.partition.slice(at + 2),
      partition: task.partition,
      shard: task.shard,
      dueAt: isoTime(task.dueAt),
      queuedAt: isoTime(task.publishedAt),
      tryCount: queued?.tryCount ?? null,
      deadline: queued?.deadlineAt === undefined ? null : isoTime(queued.deadlineAt),
      priority: task.priority,
      debounce: requests[i]?.debounce ?? null,
      concurrency: requests[i]?.concurrency ?? null,
      deliveries: task.deliveries,
      leaseExpiresAt: state === 'in-flight' ? isoTime(task.at) : null,
      leaseToken: task.token ?? null,
      deadAt: state === 'dead' ? isoTime(task.at) : null,
      reason: task.reason ?? null,
      origin: safeOrigin(uri),
      uri: uri === null ? null : redactUrl(uri),
    };
  });
  return rows.filter((row) => !origin || row.origin === origin);
}

type Queued = ReturnType<typeof decodeQueuedTask>;

function safeDecode(payload: string): Queued | undefined {
  try {
    return decodeQueuedTask(payload);
  } catch {
    return undefined;
  }
}

/** What the lists show of a task's request: its URL, its debounce key and its concurrency key. */
interface RequestFacts {
  uri: string;
  debounce?: string;
  concurrency?: { key: string; limit: number };
}

/** Each task's request facts: from its inline record, else read from `in` (one batch per page). */
async function requestFacts(
  tasks: ReadonlyArray<Queued | undefined>,
  reader: Pick<Fetcher, 'fetchMany'> | undefined,
): Promise<Array<RequestFacts | undefined>> {
  const factsOf = (value: unknown): RequestFacts | undefined => {
    try {
      const envelope = (typeof value === 'string' ? JSON.parse(value) : value) as {
        request?: { uri?: unknown };
        meta?: { debounce?: { key?: unknown }; concurrency?: { key?: unknown; limit?: unknown } };
      };
      if (typeof envelope?.request?.uri !== 'string') return undefined;
      const debounce = envelope.meta?.debounce?.key;
      const { key, limit } = envelope.meta?.concurrency ?? {};
      return {
        uri: envelope.request.uri,
        ...(typeof debounce === 'string' ? { debounce } : {}),
        ...(typeof key === 'string' && typeof limit === 'number' ? { concurrency: { key, limit } } : {}),
      };
    } catch {
      return undefined;
    }
  };
  const out = tasks.map((task) => (task?.inline ? factsOf(task.inline.value) : undefined));
  const wanted = tasks.flatMap((task, i) => (task && out[i] === undefined ? [{ ref: task.ref, i }] : []));
  if (!reader || wanted.length === 0) return out;
  const outcomes = await reader.fetchMany(wanted.map((w) => w.ref)).catch(() => []);
  wanted.forEach(({ i }, j) => {
    const outcome = outcomes[j];
    if (outcome?.ok) out[i] = factsOf(String(outcome.record.value));
  });
  return out;
}

function tryCountOf(taskId: string): number | null {
  const match = /:(\d+)(?::w\d+)?(?: @|$)/.exec(taskId);
  return match ? Number(match[1]) : null;
}

function cursorError(err: unknown): never {
  if (err instanceof RangeError) throw new UsageError(`cursor: ${err.message}`);
  throw err;
}

function duration(name: string, text: string): number {
  const parsed = tryParseDuration(text);
  if (!parsed.ok) throw new UsageError(`--${name}: ${parsed.message}`);
  return Number(parsed.ns / 1_000_000n);
}
