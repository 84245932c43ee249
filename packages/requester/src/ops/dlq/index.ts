import {
  type Config,
  deadLetterRequestId,
  type EntrySigner,
  type Journal,
  type KafkaProducer,
  type RecordRef,
  type RedisClient,
  type Sql,
  tryParseRfc3339,
  UsageError,
} from '@requester/shared';
import { originArg } from '../breakers/index.ts';
import { redactUrl } from '../redact.ts';
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
} from './topic.ts';

/**
 * Dead letters as an operator sees and handles them: views (secrets hidden unless revealed), the
 * selection of `dlq list|replay|delete` and of the admin API, replays, and those marked handled.
 * Reading and replaying the DLQ topic itself is ./topic.ts.
 */

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
  /** DLQ positions `topic/partition/offset` (the UI's checkboxes). */
  refs?: readonly string[];
  since?: string;
  until?: string;
  origin?: string;
  errorCode?: string;
  client?: string;
  destination?: string;
}

export function dlqFilterFrom(selection: DlqSelection): DlqFilter {
  const filter: DlqFilter = {};
  if (selection.requestIds?.length) filter.requestIds = new Set(selection.requestIds.map(String));
  if (selection.refs?.length) filter.refs = new Set(selection.refs.map(String));
  if (selection.since) filter.sinceMs = timeArg('since', selection.since);
  if (selection.until) filter.untilMs = timeArg('until', selection.until);
  if (selection.origin) filter.origin = originArg(selection.origin, 'filter');
  if (selection.errorCode) filter.errorCode = selection.errorCode;
  if (selection.client) filter.client = selection.client;
  if (selection.destination) filter.destination = selection.destination;
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
    /** What re-sends them, as the journal's `replayed` events name it (default `requester dlq replay`). */
    by?: string;
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
        ...(target.by ? { by: target.by } : {}),
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
