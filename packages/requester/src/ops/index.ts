import { apiKeyLimiterPrefix } from '@requester/ingress';
import {
  type BreakerSnapshot,
  type CircuitBreaker,
  inspectLimiter,
  type LimiterWindow,
  type LimiterWindowState,
  limiterKeyOf,
  originOf,
} from '@requester/policies';
import type { PartitionView, QueueAdmin } from '@requester/queue';
import {
  type Config,
  counter,
  deadLetterRequestId,
  decodeQueuedTask,
  durationToMs,
  type EntrySigner,
  type Fetcher,
  type Journal,
  type KafkaProducer,
  type KafkaRef,
  type Logger,
  type Outbox,
  type RecordRef,
  type RedisClient,
  type Sql,
  tryParseRfc3339,
  UsageError,
} from '@requester/shared';
import {
  type DlqEntry,
  type DlqFilter,
  type DlqSource,
  deadLetterOrigin,
  listDeadLetters,
  ReplayMarks,
  type ReplayOptions,
  type ReplaySummary,
  replayDeadLetters,
} from '../dlq/index.ts';
import { redactQueuedPayload, redactUrl } from './redact.ts';

export * from './redact.ts';

/**
 * The operations an operator runs, shared by the admin CLI (`requester breakers|outbox|limiter|
 * dlq|queue …`) and the admin API of the admin port (`/admin/api/…`, behind the operator UI):
 * each one reads or acts through the same function, and returns the JSON view both print. The CLI
 * renders it as a table, the API as JSON, the UI as HTML. Views of requests hide their secrets
 * (./redact.ts) unless asked to `reveal` them, which callers journal as an operator action.
 */

/** An ISO timestamp for JSON output (null when absent). */
export function isoTime(epochMs: number | null | undefined): string | null {
  return epochMs === null || epochMs === undefined ? null : new Date(epochMs).toISOString();
}

// ---- circuit breakers -------------------------------------------------------------------------

export interface BreakerView {
  origin: string;
  state: BreakerSnapshot['state'];
  /** Consecutive failures while closed; null: not seen (or forgotten). */
  failures: number | null;
  opensInARow: number;
  openSince: string | null;
  openUntil: string | null;
  /** Probe / trial slots held now. */
  slots: number;
}

function breakerView(origin: string, s: BreakerSnapshot): BreakerView {
  return {
    origin,
    state: s.state,
    failures: s.failures ?? null,
    opensInARow: s.opens,
    openSince: isoTime(s.openSinceMs),
    openUntil: isoTime(s.openUntilMs),
    slots: s.slots,
  };
}

/** Open and half-open origins, latest open-until first. */
export async function listBreakers(breaker: CircuitBreaker, limit: number): Promise<BreakerView[]> {
  if (!Number.isInteger(limit) || limit < 1)
    throw new UsageError(`limit must be a whole number ≥ 1, got ${limit}`);
  const open = await breaker.openOrigins(limit);
  return Promise.all(open.map(async ({ origin }) => breakerView(origin, await breaker.snapshot(origin))));
}

export async function showBreaker(breaker: CircuitBreaker, origin: string): Promise<BreakerView> {
  return breakerView(origin, await breaker.snapshot(origin));
}

/** Closes the breaker of an origin; `reset` false when it had no state (closed already). */
export async function resetBreaker(
  breaker: CircuitBreaker,
  origin: string,
): Promise<{ origin: string; reset: boolean }> {
  return { origin, reset: await breaker.reset(origin) };
}

/** An origin from an origin or any URL on it; a UsageError naming the input otherwise. */
export function originArg(text: string | undefined, action: string): string {
  if (!text) throw new UsageError(`breakers ${action} needs an origin, e.g. https://api.x.com`);
  try {
    return originOf(text);
  } catch {
    throw new UsageError(`not an origin or URL: ${JSON.stringify(text)} (e.g. https://api.x.com)`);
  }
}

// ---- outbox -----------------------------------------------------------------------------------

export interface OutboxView {
  rows: number;
  overdue: number;
  oldestDueAt: string | null;
  nextDueAt: string | null;
  lastDueAt: string | null;
  payloadBytes: number;
  at: string | null;
}

export async function outboxInfo(outbox: Pick<Outbox, 'stats'>): Promise<OutboxView> {
  const stats = await outbox.stats();
  return {
    rows: stats.rows,
    overdue: stats.overdue,
    oldestDueAt: isoTime(stats.oldestDueAt),
    nextDueAt: isoTime(stats.nextDueAt),
    lastDueAt: isoTime(stats.lastDueAt),
    payloadBytes: stats.payloadBytes,
    at: isoTime(stats.nowMs),
  };
}

// ---- limiters ---------------------------------------------------------------------------------

export type LimiterView = Omit<LimiterWindowState, 'resetAtMs'> & { resetAt: string | null };

/**
 * The current windows of a limiter key: the executor's (meta.limiter.key), or with `apiKey` the
 * ingress's per-API-key rate (its own prefix).
 */
export async function showLimiter(
  redis: RedisClient,
  config: Pick<Config, 'redisPrefix' | 'sharedLimiterKeys'>,
  key: string,
  rates: LimiterWindow[],
  apiKey = false,
  client?: string,
): Promise<{ windows: LimiterWindowState[]; views: LimiterView[] }> {
  const prefix = apiKey ? apiKeyLimiterPrefix(config.redisPrefix) : `${config.redisPrefix}:`;
  // A request's limiter key is its client's, unless declared shared: the one the executor spends.
  const name = apiKey ? key : limiterKeyOf(client, key, config.sharedLimiterKeys);
  const windows = await inspectLimiter(redis, prefix, name, rates);
  return { windows, views: windows.map(({ resetAtMs, ...w }) => ({ ...w, resetAt: isoTime(resetAtMs) })) };
}

/** `100/1s`, `5000/1h`, `10/s` (a bare unit means one of it). */
export function rateArg(text: string): LimiterWindow {
  const match = /^(\d+)\/(\d*\.?\d*[a-zµ]+)$/.exec(text.trim());
  const value = Number(match?.[1]);
  if (!match || !Number.isSafeInteger(value) || value < 1)
    throw new UsageError(`--rate ${JSON.stringify(text)} is not <value>/<duration>, e.g. 100/1s or 5000/1h`);
  const duration = /^\d/.test(match[2] ?? '') ? (match[2] ?? '') : `1${match[2]}`;
  let durationMs: number;
  try {
    durationMs = durationToMs(duration);
  } catch (err) {
    throw new UsageError(
      `--rate ${JSON.stringify(text)}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  if (durationMs < 1) throw new UsageError(`--rate ${JSON.stringify(text)}: a window is at least 1ms`);
  return { durationMs, value };
}

// ---- partitions -------------------------------------------------------------------------------

export interface PartitionRow extends PartitionView {
  /** Why its head waits, as far as can be told (see `whyWaiting`). */
  why: string;
  /** The head task's request, when its `in` record could be read. */
  requestId: string | null;
  origin: string | null;
  tryCount: number | null;
  waitedMs: number | null;
}

/**
 * The heaviest partitions (most pending) and the most held back (waiting or blocked, longest wait
 * first), `limit` of each, each head explained. The queue does not keep why a task was put back,
 * so the reason is inferred from what is known now: the head's progress (its try count, time
 * waited for limits), its request's origin (an open breaker) and limiter key.
 */
export async function partitionsOverview(
  admin: QueueAdmin,
  limit: number,
  context: { breaker?: CircuitBreaker; inRecords?: Pick<Fetcher, 'fetchMany'>; reveal?: boolean },
): Promise<{ heaviest: PartitionRow[]; held: PartitionRow[]; at: string | null }> {
  const { partitions, nowMs } = await admin.partitions(limit);
  const heaviest = partitions.filter((p) => p.pending > 0).slice(0, limit);
  const held = partitions
    .filter((p) => p.state === 'waiting' || p.state === 'blocked')
    .sort((a, b) => (a.head?.publishedAt ?? nowMs) - (b.head?.publishedAt ?? nowMs))
    .slice(0, limit);
  const unique = [...new Map([...heaviest, ...held].map((p) => [p.partition, p])).values()];
  const explained = new Map(
    (await explainHeads(unique, nowMs, context)).map((row) => [row.partition, row] as const),
  );
  const pick = (p: PartitionView) => explained.get(p.partition) as PartitionRow;
  return { heaviest: heaviest.map(pick), held: held.map(pick), at: isoTime(nowMs) };
}

interface HeadRequest {
  requestId: string;
  origin?: string;
  limiterKey?: string;
}

async function explainHeads(
  views: PartitionView[],
  nowMs: number,
  context: { breaker?: CircuitBreaker; inRecords?: Pick<Fetcher, 'fetchMany'>; reveal?: boolean },
): Promise<PartitionRow[]> {
  const tasks = views.map((v) => (v.head ? safeDecode(v.head.payload) : undefined));
  const refs = tasks.map((t) => t?.ref);
  const requests = await readRequests(refs, context.inRecords);
  const openOrigins = new Map(
    ((await context.breaker?.openOrigins(1_000).catch(() => [])) ?? []).map((o) => [o.origin, o] as const),
  );
  return views.map((view, i) => {
    const task = tasks[i];
    const request = requests[i];
    return {
      ...view,
      head:
        view.head && !context.reveal
          ? { ...view.head, payload: redactQueuedPayload(view.head.payload) }
          : view.head,
      requestId: request?.requestId ?? task?.requestId ?? null,
      origin: request?.origin ?? null,
      tryCount: task?.tryCount ?? null,
      waitedMs: task?.waitedMs ?? null,
      why: whyWaiting(view, nowMs, task, request, openOrigins),
    };
  });
}

/** The best explanation of why a partition's head is not running now. */
export function whyWaiting(
  view: PartitionView,
  nowMs: number,
  task: { tryCount: number; waitedMs?: number } | undefined,
  request: HeadRequest | undefined,
  openOrigins: ReadonlyMap<string, { retryAtMs: number }>,
): string {
  if (view.state === 'ready') return 'ready: its turn in the round-robin comes';
  if (view.state === 'idle') return 'idle: nothing pending';
  if (view.state === 'blocked')
    return view.partition.startsWith('!')
      ? 'bulkhead: ordered, its previous task is in flight (one at a time)'
      : 'bulkhead: its in-flight limit (QUEUE_PARTITION_CONCURRENCY) is reached';
  const until =
    view.wakeAt === null ? '' : ` (due in ${Math.max(0, Math.round((view.wakeAt - nowMs) / 1000))} s)`;
  const open = request?.origin ? openOrigins.get(request.origin) : undefined;
  if (open) return `breaker: ${request?.origin} is open${until}`;
  if ((view.head?.deliveries ?? 0) === 0) return `schedule: not due yet${until}`;
  if ((task?.waitedMs ?? 0) > 0 && request?.limiterKey) return `limiter: key ${request.limiterKey}${until}`;
  if ((task?.waitedMs ?? 0) > 0) return `limiter or breaker wait${until}`;
  if ((task?.tryCount ?? 0) > 0) return `retry: backoff before try ${(task?.tryCount ?? 0) + 1}${until}`;
  if (view.partition.startsWith('!')) return `ordered: held after a reject${until}`;
  return `waiting${until}`;
}

function safeDecode(payload: string) {
  try {
    return decodeQueuedTask(payload);
  } catch {
    return undefined;
  }
}

/** The requests behind the heads, read from `in` by offset (never throws: unread ones are undefined). */
async function readRequests(
  refs: ReadonlyArray<KafkaRef | undefined>,
  reader: Pick<Fetcher, 'fetchMany'> | undefined,
): Promise<Array<HeadRequest | undefined>> {
  const wanted = refs.flatMap((ref, i) => (ref ? [{ ref, i }] : []));
  const out: Array<HeadRequest | undefined> = refs.map(() => undefined);
  if (!reader || wanted.length === 0) return out;
  const outcomes = await reader.fetchMany(wanted.map((w) => w.ref)).catch(() => []);
  wanted.forEach(({ i }, j) => {
    const outcome = outcomes[j];
    if (!outcome?.ok) return;
    try {
      const envelope = JSON.parse(String(outcome.record.value)) as {
        request?: { uri?: string };
        meta?: { requestId?: string; limiter?: { key?: string } };
      };
      const uri = envelope.request?.uri;
      out[i] = {
        requestId: envelope.meta?.requestId ?? '',
        ...(uri ? { origin: safeOrigin(uri) } : {}),
        ...(envelope.meta?.limiter?.key ? { limiterKey: envelope.meta.limiter.key } : {}),
      };
    } catch {
      // an unreadable record: no explanation from its request
    }
  });
  return out;
}

function safeOrigin(uri: string): string | undefined {
  try {
    return originOf(uri);
  } catch {
    return undefined;
  }
}

// ---- dead letters -----------------------------------------------------------------------------

export interface DeadLetterView {
  dlq: RecordRef;
  ref: string;
  requestId: string | null;
  failedAt: string;
  reason: string;
  status: number;
  tryCount: number;
  errorCode: string | null;
  origin: string | null;
  client: string | null;
  /** The request's URL, redacted (./redact.ts) unless revealed. */
  uri: string | null;
}

export function deadLetterView({ record, at }: DlqEntry, reveal = false): DeadLetterView {
  const uri = record.envelope?.request.uri ?? null;
  return {
    dlq: at,
    ref: `${at.topic}/${at.partition}/${at.offset}`,
    requestId: deadLetterRequestId(record) ?? null,
    failedAt: record.failedAt,
    reason: record.reason,
    status: record.result.response.status,
    tryCount: record.result.meta.tryCount,
    errorCode: record.result.meta.error?.code ?? null,
    origin: deadLetterOrigin(record) ?? null,
    client: record.envelope?.meta.client ?? record.result.meta.client ?? null,
    uri: uri === null || reveal ? uri : redactUrl(uri),
  };
}

/** The selection of `dlq list|replay|delete` and of the admin API, from its textual form. */
export interface DlqSelection {
  requestIds?: readonly string[];
  since?: string;
  until?: string;
  origin?: string;
  errorCode?: string;
  client?: string;
}

export function dlqFilterFrom(selection: DlqSelection): DlqFilter {
  const filter: DlqFilter = {};
  if (selection.requestIds?.length) filter.requestIds = new Set(selection.requestIds.map(String));
  if (selection.since) filter.sinceMs = timeArg('since', selection.since);
  if (selection.until) filter.untilMs = timeArg('until', selection.until);
  if (selection.origin) filter.origin = originArg(selection.origin, 'filter');
  if (selection.errorCode) filter.errorCode = selection.errorCode;
  if (selection.client) filter.client = selection.client;
  return filter;
}

function timeArg(name: string, text: string): number {
  const parsed = tryParseRfc3339(text);
  if (!parsed.ok) throw new UsageError(`--${name}: ${parsed.message}`);
  return parsed.epochMs;
}

/** The most recent matching dead letters, newest first, as views (secrets hidden unless `reveal`). */
export async function listDeadLetterViews(
  source: DlqSource,
  filter: DlqFilter,
  limit: number,
  reveal = false,
): Promise<{
  read: number;
  matched: number;
  unreadable: number;
  incomplete: number[];
  entries: DeadLetterView[];
}> {
  const { entries, ...counts } = await listDeadLetters(source, filter, limit);
  return { ...counts, entries: entries.map((entry) => deadLetterView(entry, reveal)).reverse() };
}

/**
 * Replays the selected dead letters to `in` (see replayDeadLetters), reading them back by offset
 * with a fetcher of its own. `producer` must be connected unless it is a dry run.
 */
export async function replayFromDlq(
  source: DlqSource,
  target: {
    producer: KafkaProducer;
    redis: RedisClient;
    config: Pick<Config, 'topicIn' | 'redisPrefix' | 'kafkaProduceTimeout'>;
    onReplayed?(done: number, total: number): void;
    /** The task journal (`replayed`); absent = none. */
    journal?: Journal;
    /** Signs the replays (`Dependencies.entrySigner`), asked for once one is written. */
    signer: () => Promise<EntrySigner>;
  },
  options: ReplayOptions,
): Promise<ReplaySummary> {
  const reader = source.kafka.fetcher();
  try {
    return await replayDeadLetters(
      { ...source, reader },
      {
        producer: target.producer,
        topicIn: target.config.topicIn,
        marks: new ReplayMarks(target.redis, target.config.redisPrefix),
        produceTimeoutMs: target.config.kafkaProduceTimeout,
        signer: target.signer,
        ...(target.onReplayed ? { onReplayed: target.onReplayed } : {}),
        ...(target.journal ? { journal: target.journal } : {}),
      },
      options,
    );
  } finally {
    await reader.close();
  }
}

/**
 * Dead letters an operator marked as handled (migration 003). The DLQ is a Kafka topic, whose
 * records cannot be deleted one by one: "delete" records the position here, and lists and
 * replays leave it out from then on. The record itself stays until the topic's retention.
 */
export class HandledDeadLetters {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async mark(entries: ReadonlyArray<{ ref: string; requestId: string | null }>, by: string): Promise<number> {
    if (entries.length === 0) return 0;
    const rows = entries.map((e) => ({ dlq_ref: e.ref, request_id: e.requestId, handled_by: by }));
    const inserted = await this.#sql`insert into requester_dead_letters_handled ${this.#sql(rows)}
      on conflict (dlq_ref) do nothing returning dlq_ref`;
    return inserted.length;
  }

  /** The handled positions of one DLQ topic. */
  async refs(topic: string): Promise<Set<string>> {
    const rows = await this.#sql<
      Array<{ dlq_ref: string }>
    >`select dlq_ref from requester_dead_letters_handled
      where starts_with(dlq_ref, ${`${topic}/`})`;
    return new Set(rows.map((r) => r.dlq_ref));
  }
}

// ---- audit ------------------------------------------------------------------------------------

const adminActions = counter(
  'admin_actions_total',
  'operator actions (admin API, UI and CLI), by action, actor (API key name, or cli:<user>) and outcome',
  ['action', 'actor', 'outcome'],
);

export interface AdminActionEvent {
  action: string;
  /** Who: the admin key's name, or `cli:<os user>`. */
  actor: string;
  target: Record<string, unknown>;
  outcome: 'done' | 'failed';
  at: string;
}

/**
 * Records an operator action: a log line at info and the `admin_actions_total` metric, then
 * `journalAdminAction` when one is wired — the task journal's hook: an `admin_action` event for
 * each request the action names (runtime/journal.ts).
 */
export async function recordAdminAction(
  logger: Logger,
  event: Omit<AdminActionEvent, 'at'>,
  journalAdminAction?: (event: AdminActionEvent) => Promise<void>,
): Promise<void> {
  const full = { ...event, at: new Date().toISOString() };
  logger.info(
    { adminAction: full.action, actor: full.actor, target: full.target, outcome: full.outcome },
    'admin action',
  );
  adminActions.inc({ action: full.action, actor: full.actor, outcome: full.outcome });
  await journalAdminAction?.(full).catch((err: unknown) =>
    logger.warn({ err, adminAction: full.action }, 'admin action not journaled'),
  );
}
