import { z } from 'zod';
import { ValidationError } from '../errors/index.ts';
import type { OutgoingRecord } from '../kafka/types.ts';
import { formatRfc3339 } from '../time/rfc3339.ts';
import { rfc3339 } from './fields.ts';
import { parseWith } from './issues.ts';
import {
  createRequestContract,
  MAX_RETRY_ATTEMPTS,
  type RequestContract,
  type RequestEnvelope,
} from './request.ts';
import { type RecordRef, type ResultEnvelope, recordRefSchema, resultEnvelopeSchema } from './result.ts';

/**
 * The dead-letter record (docs/architecture.md §5 "Exhausted / permanent"): the value of a record on the DLQ
 * topic (`KAFKA_TOPIC_DLQ`), keyed by requestId. It keeps what is needed to understand the failure
 * and to re-submit the request unchanged: the envelope as it was read from `in`, the final result
 * that went to `out`, why it was dead-lettered, when, and where the `in` record was.
 *
 * Like the result, the record object is not strict (readers ignore fields added later); the
 * envelope inside is validated by the request contract, so a replay can only re-submit a valid one.
 */

/** Reasons the executor writes. Readers must accept others (new reasons may be added). */
export const DEAD_LETTER_REASONS = {
  /** A retryable failure (429, 408, 5xx, transport) with no attempt left in `meta.retry.max`. */
  retriesExhausted: 'retries_exhausted',
  /** A failure retrying cannot fix (other 4xx, a target the SSRF guard refuses...). */
  permanent: 'permanent',
  /**
   * A record a consumer could not process: unreadable or not a valid request, or refused by the
   * queue, the outbox or Kafka (`result.meta.error` says which). `envelope` is absent when the
   * record held no valid request; `record` keeps the raw record then.
   */
  unprocessable: 'unprocessable',
} as const;

/** Kafka headers of a DLQ record, so tools can route on them without parsing the value. */
export const DEAD_LETTER_HEADERS = {
  reason: 'requester-dlq-reason',
  /** `topic/partition/offset` of the `in` record (topic names cannot contain `/`). */
  source: 'requester-dlq-source',
  failedAt: 'requester-dlq-failed-at',
  /** The result's HTTP status (the target's, or synthetic). */
  status: 'requester-dlq-status',
} as const;

const REASON_PATTERN = /^[a-z][a-z0-9_]*$/;

/** Largest key or value of a raw record kept in a dead letter (bytes, before base64). */
export const MAX_DEAD_LETTER_RAW_BYTES = 64 * 1024;

const rawRecordSchema = z
  .object({
    key: z.base64().nullable().meta({ description: 'The record key, base64 (null: no key).' }),
    value: z.base64().nullable().meta({ description: 'The record value, base64 (null: none, a tombstone).' }),
    keyBytes: z
      .number()
      .int()
      .min(0)
      .optional()
      .meta({ description: 'Present only when `key` was cut short: the size of the whole key.' }),
    valueBytes: z
      .number()
      .int()
      .min(0)
      .optional()
      .meta({ description: 'Present only when `value` was cut short: the size of the whole value.' }),
  })
  .meta({
    title: 'RawRecord',
    description: `A Kafka record as it was read, each part cut to ${MAX_DEAD_LETTER_RAW_BYTES} bytes.`,
  });

const deadLetterShape = {
  envelope: z
    .record(z.string(), z.unknown())
    .meta({
      description:
        'The request envelope as read from `in` (RequestEnvelope), service-set fields included. Absent when the record held no valid request (reason unprocessable): see `record`.',
    })
    .optional(),
  record: rawRecordSchema
    .meta({ description: 'The raw `in` record, when it held no valid request (then `envelope` is absent).' })
    .optional(),
  result: resultEnvelopeSchema.meta({
    description: 'The final result, as written to `out` (ResultEnvelope).',
  }),
  reason: z.string().regex(REASON_PATTERN).meta({
    description:
      'Why the request was dead-lettered: retries_exhausted (retryable failures, no attempt left), permanent (a failure retrying cannot fix), unprocessable (a record that could not be read, validated or queued; result.meta.error says why). Readers must accept other values.',
  }),
  failedAt: rfc3339('When the request was dead-lettered.'),
  source: recordRefSchema
    .meta({
      description:
        'The `in` record the request was read from. Absent only for a task the relay could not put back on `in` from the outbox (it has no `in` record of its own).',
    })
    .optional(),
  resultBodyBytes: z
    .number()
    .int()
    .min(0)
    .meta({
      description:
        'Present only when result.response.body was cut short to keep the record small: the size of the whole body in UTF-8 bytes (the full result is on `out`).',
    })
    .optional(),
};

export const deadLetterSchema = z.object(deadLetterShape).meta({
  title: 'DeadLetter',
  description:
    'A request that failed for good: the value of a record on the DLQ topic (key: meta.requestId, else the key of the `in` record). `requester dlq replay` re-submits its envelope to `in`. Readers must ignore unknown fields.',
});

export type RawRecord = z.output<typeof rawRecordSchema>;

/** A dead letter holding a request (which `requester dlq replay` can re-submit). */
export type DeadLetter = Omit<z.output<typeof deadLetterSchema>, 'envelope'> & {
  envelope: RequestEnvelope;
};

/** A dead letter of a record that held no valid request: its raw `record` instead of an envelope. */
export type UnprocessableDeadLetter = Omit<z.output<typeof deadLetterSchema>, 'envelope' | 'record'> & {
  envelope?: undefined;
  record: RawRecord;
};

export type AnyDeadLetter = DeadLetter | UnprocessableDeadLetter;

/** The requestId a dead letter is about: its envelope's, else the one its result carries. */
export function deadLetterRequestId(record: AnyDeadLetter): string | undefined {
  return record.envelope?.meta.requestId ?? record.result.meta.requestId;
}

const defaultContract = createRequestContract();

/**
 * Parses a DLQ record value (Buffer, JSON text or an object); throws a ValidationError naming
 * each bad field (`envelope.meta.requestId`, `failedAt`...). `contract`: the request contract of
 * the deployment, when it runs with non-default size limits.
 */
export function parseDeadLetter(value: unknown, contract: RequestContract = defaultContract): DeadLetter {
  const record = parseAnyDeadLetter(value, contract);
  if (!record.envelope)
    throw new ValidationError([{ path: 'envelope', message: 'absent: nothing to replay' }]);
  return record;
}

/** Like parseDeadLetter, also accepting dead letters of unprocessable records (no envelope, a raw `record`). */
export function parseAnyDeadLetter(
  value: unknown,
  contract: RequestContract = defaultContract,
): AnyDeadLetter {
  const input = Buffer.isBuffer(value) || typeof value === 'string' ? JSON.parse(String(value)) : value;
  const { envelope: raw, record: rawRecord, ...record } = parseWith(deadLetterSchema, input);
  if (raw === undefined) {
    if (!rawRecord) throw new ValidationError([{ path: 'envelope', message: 'absent, and no raw record' }]);
    return { ...record, record: rawRecord };
  }
  const envelope = contract.safeParse(raw);
  if (!envelope.ok) {
    throw new ValidationError(
      envelope.error.issues.map((i) => ({ ...i, path: i.path ? `envelope.${i.path}` : 'envelope' })),
    );
  }
  return { ...record, ...(rawRecord ? { record: rawRecord } : {}), envelope: envelope.value };
}

/** `topic/partition/offset`, the value of the source header. */
export function formatRecordRef(ref: RecordRef): string {
  return `${ref.topic}/${ref.partition}/${ref.offset}`;
}

/**
 * The envelope `requester dlq replay` writes to `in` for a dead letter.
 *
 * - Same requestId (results reach the caller's routing on `out` as before; the Idempotency-Key,
 *   derived from it, stays too: a target that saw an earlier attempt can still drop a duplicate).
 * - `tryCount` continues after the attempts already made (replayTryCount), so the queue task id
 *   (`requestId:tryCount`) is one never used before: the queue and outbox dedup (which refuse the
 *   old ids) accept it, and replaying the same dead letter twice yields the same id again, which
 *   the dedup refuses while it remembers it.
 * - `retryBase = tryCount`: the executor counts `meta.retry.max` and the backoff from there (see
 *   attemptsInBudget), so the replay has a fresh retry budget.
 * - `createdAt` is the replay time (latency and waitTime measure this run); `waitTime` starts over.
 */
export function replayEnvelope(
  record: DeadLetter,
  options: { nowMs?: number; previousReplay?: number } = {},
): RequestEnvelope {
  const { waitTime: _waited, ...envelope } = record.envelope;
  const tryCount = replayTryCount(record, options.previousReplay);
  return {
    ...envelope,
    tryCount,
    retryBase: tryCount,
    createdAt: formatRfc3339(options.nowMs ?? Date.now()),
  };
}

/**
 * The `tryCount` of a replay: the attempts made (at least one past the dead task's own id). With
 * `previousReplay` — the tryCount an earlier replay of this very record used, when it is replayed
 * again on purpose — past every id that replay may have used: its budget held at most
 * MAX_RETRY_ATTEMPTS attempts, so a forced replay is new to the dedup too.
 */
export function replayTryCount(record: DeadLetter, previousReplay?: number): number {
  const attempts = Math.max(record.result.meta.tryCount, (record.envelope.tryCount ?? 0) + 1);
  if (previousReplay === undefined) return attempts;
  return Math.max(attempts, previousReplay + MAX_RETRY_ATTEMPTS + 1);
}

/** What a dead letter is built from. */
export interface DeadLetterInput {
  /** The envelope as read from `in` (service-set fields included); absent when it held no valid request. */
  envelope?: RequestEnvelope;
  /** The raw `in` record: kept in the dead letter when there is no valid envelope. */
  record?: { key: Buffer | null; value: Buffer | null };
  /** The final result, as produced to `out`. */
  result: ResultEnvelope;
  /** `retries_exhausted`, `permanent`, `unprocessable` (DEAD_LETTER_REASONS), or another snake_case code. */
  reason: string;
  /** The `in` record of the task (absent: a task refused on its way back from the outbox). */
  source?: RecordRef;
  /** Epoch ms or Date; default now. */
  failedAt?: number | Date;
}

/**
 * Largest result body kept in a DLQ record (UTF-8 bytes). A target may answer with up to
 * TARGET_MAX_RESPONSE_BYTES; with the envelope beside it the record could outgrow the topic's
 * max.message.bytes and fail to be written at all. The whole result is on `out` anyway.
 */
export const MAX_DEAD_LETTER_BODY_BYTES = 64 * 1024;

/** The record value (what `parseDeadLetter` gives back). */
export function deadLetterRecord(
  input: DeadLetterInput,
  maxBodyBytes = MAX_DEAD_LETTER_BODY_BYTES,
): AnyDeadLetter {
  if (!REASON_PATTERN.test(input.reason))
    throw new RangeError(`dead-letter reason must be snake_case: ${input.reason}`);
  const failedAt = formatRfc3339(
    input.failedAt instanceof Date ? input.failedAt.getTime() : (input.failedAt ?? Date.now()),
  );
  const { body, bytes } = capUtf8(input.result.response.body, maxBodyBytes);
  const result =
    bytes === undefined ? input.result : { ...input.result, response: { ...input.result.response, body } };
  const common = {
    result,
    reason: input.reason,
    failedAt,
    ...(input.source ? { source: recordRef(input.source) } : {}),
    ...(bytes === undefined ? {} : { resultBodyBytes: bytes }),
  };
  if (input.envelope) return { envelope: input.envelope, ...common };
  return { ...common, record: rawRecord(input.record ?? { key: null, value: null }) };
}

/**
 * The Kafka message for the DLQ topic: JSON value, routing headers, keyed like the result on `out`
 * (the requestId; for a record that held none, the key of that record — see answerKey).
 */
export function deadLetterMessage(
  input: DeadLetterInput,
  maxBodyBytes = MAX_DEAD_LETTER_BODY_BYTES,
): OutgoingRecord {
  const record = deadLetterRecord(input, maxBodyBytes);
  const headers: Record<string, string> = {
    [DEAD_LETTER_HEADERS.reason]: record.reason,
    [DEAD_LETTER_HEADERS.failedAt]: record.failedAt,
    [DEAD_LETTER_HEADERS.status]: String(record.result.response.status),
  };
  if (record.source) headers[DEAD_LETTER_HEADERS.source] = formatRecordRef(record.source);
  // Tracing tools follow the request's trace into the DLQ.
  if (record.envelope?.meta.traceparent) headers.traceparent = record.envelope.meta.traceparent;
  const key = deadLetterRequestId(record) ?? answerKey(input.record?.key ?? null);
  return { key, value: JSON.stringify(record), headers };
}

/**
 * Longest record key echoed as the key of an answer (bytes). Keys Requester reads are requestIds or
 * partitions (at most MAX_ID_LENGTH); a longer one held no valid request, and echoing a key of
 * megabytes could make its answer too large for `out`: it is cut to this.
 */
export const MAX_ANSWER_KEY_BYTES = 1024;

/** The key of the answer to a record that held no readable requestId: the record's own key, capped. */
export function answerKey(key: Buffer | null): Buffer | null {
  if (key === null) return null;
  return key.length > MAX_ANSWER_KEY_BYTES ? key.subarray(0, MAX_ANSWER_KEY_BYTES) : key;
}

/** An error result naming the record it is about (`meta.error.source`). */
export function sourcedResult(result: ResultEnvelope, source: RecordRef): ResultEnvelope {
  const error = result.meta.error ?? { code: 'internal', message: 'unprocessable record' };
  return { ...result, meta: { ...result.meta, error: { ...error, source: recordRef(source) } } };
}

/** Only the position (a fetched record carries more). */
function recordRef({ topic, partition, offset }: RecordRef): RecordRef {
  return { topic, partition, offset };
}

function rawRecord(record: { key: Buffer | null; value: Buffer | null }): RawRecord {
  const part = (data: Buffer | null) =>
    data === null ? null : data.subarray(0, MAX_DEAD_LETTER_RAW_BYTES).toString('base64');
  const raw: RawRecord = { key: part(record.key), value: part(record.value) };
  if (record.key && record.key.length > MAX_DEAD_LETTER_RAW_BYTES) raw.keyBytes = record.key.length;
  if (record.value && record.value.length > MAX_DEAD_LETTER_RAW_BYTES) raw.valueBytes = record.value.length;
  return raw;
}

/** `text` cut to at most `maxBytes` UTF-8 bytes on a character boundary; `bytes` = original size when cut. */
function capUtf8(text: string, maxBytes: number): { body: string; bytes?: number } {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= maxBytes) return { body: text };
  let end = maxBytes;
  const buffer = Buffer.from(text, 'utf8');
  // Step back over continuation bytes (10xxxxxx) so no character is split.
  while (end > 0 && ((buffer[end] ?? 0) & 0xc0) === 0x80) end--;
  return { body: buffer.subarray(0, end).toString('utf8'), bytes };
}

/** A Kafka record a consumer read (its position, key and value). */
export interface ReadRecord extends RecordRef {
  key: Buffer | null;
  value: Buffer | null;
}

/** The two records answering a record that could not be processed. */
export interface UnprocessableAnswer {
  /** The error result for `out`. */
  result: OutgoingRecord;
  /** Its dead letter (reason `unprocessable`), for the DLQ topic. */
  deadLetter: OutgoingRecord;
}

/**
 * How a record a consumer cannot process is answered, so that it is confined to itself instead of
 * stopping its partition: its error `result` goes to `out` — with `meta.error.source` naming the
 * record, keyed by its requestId, else by the record's own key (capped, see answerKey) so a producer
 * can match it — and a dead letter to the DLQ with the envelope, or the raw record when it held no
 * valid request. The consumer then commits past it. A record with no position (an outbox row the
 * relay could not put back on `in`) is answered alike, without `source`.
 */
export function unprocessableAnswer(
  record: ReadRecord | { key: Buffer | null; value: Buffer | null },
  result: ResultEnvelope,
  envelope?: RequestEnvelope,
): UnprocessableAnswer {
  const source = 'topic' in record ? recordRef(record) : undefined;
  const answered = source ? sourcedResult(result, source) : result;
  const key = answered.meta.requestId ?? answerKey(record.key);
  return {
    result: { key, value: JSON.stringify(answered) },
    deadLetter: deadLetterMessage({
      ...(envelope ? { envelope } : { record: { key: record.key, value: record.value } }),
      result: answered,
      reason: DEAD_LETTER_REASONS.unprocessable,
      ...(source ? { source } : {}),
    }),
  };
}
