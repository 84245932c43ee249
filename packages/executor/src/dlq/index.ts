import {
  DEAD_LETTER_HEADERS,
  type DeadLetter,
  formatRecordRef,
  formatRfc3339,
  type KafkaRef,
  type Message,
  type RequestEnvelope,
  type ResultEnvelope,
} from '@requester/shared';

export {
  DEAD_LETTER_HEADERS,
  DEAD_LETTER_REASONS,
  type DeadLetter,
  parseDeadLetter,
  replayEnvelope,
} from '@requester/shared';

/**
 * The dead-letter record of a request that failed for good (DESIGN.md §5 "Exhausted / permanent"),
 * written to the DLQ topic next to its final result on `out`. The format is a public contract
 * (`contracts/dead-letter.schema.json`, schema and parser in `@requester/shared`); this module
 * builds the Kafka message. `requester dlq list|replay` reads it back.
 */

export interface DeadLetterInput {
  /** The envelope as read from `in` (service-set fields included). */
  envelope: RequestEnvelope;
  /** The final result, as produced to `out`. */
  result: ResultEnvelope;
  /** `retries_exhausted`, `permanent` (DEAD_LETTER_REASONS), or another snake_case code. */
  reason: string;
  /** The `in` record of the task (its queue offset-ref). */
  source: KafkaRef;
  /** Epoch ms or Date; default now. */
  failedAt?: number | Date;
}

/**
 * Largest result body kept in a DLQ record (UTF-8 bytes). A target may answer with up to
 * TARGET_MAX_RESPONSE_BYTES; with the envelope beside it the record could outgrow the topic's
 * max.message.bytes and fail to be written at all. The whole result is on `out` anyway.
 */
export const MAX_DEAD_LETTER_BODY_BYTES = 64 * 1024;

const REASON = /^[a-z][a-z0-9_]*$/;

/** The record value (what `parseDeadLetter` gives back). */
export function deadLetterRecord(
  input: DeadLetterInput,
  maxBodyBytes = MAX_DEAD_LETTER_BODY_BYTES,
): DeadLetter {
  if (!REASON.test(input.reason))
    throw new RangeError(`dead-letter reason must be snake_case: ${input.reason}`);
  const failedAt = formatRfc3339(
    input.failedAt instanceof Date ? input.failedAt.getTime() : (input.failedAt ?? Date.now()),
  );
  const { body, bytes } = capUtf8(input.result.response.body, maxBodyBytes);
  const result =
    bytes === undefined ? input.result : { ...input.result, response: { ...input.result.response, body } };
  const source = {
    topic: input.source.topic,
    partition: input.source.partition,
    offset: input.source.offset,
  };
  const record: DeadLetter = { envelope: input.envelope, result, reason: input.reason, failedAt, source };
  if (bytes !== undefined) record.resultBodyBytes = bytes;
  return record;
}

/** The Kafka message for the DLQ topic: key requestId, JSON value, routing headers. */
export function deadLetterMessage(
  input: DeadLetterInput,
  maxBodyBytes = MAX_DEAD_LETTER_BODY_BYTES,
): Message {
  const record = deadLetterRecord(input, maxBodyBytes);
  const headers: Record<string, string> = {
    [DEAD_LETTER_HEADERS.reason]: record.reason,
    [DEAD_LETTER_HEADERS.source]: formatRecordRef(record.source),
    [DEAD_LETTER_HEADERS.failedAt]: record.failedAt,
    [DEAD_LETTER_HEADERS.status]: String(record.result.response.status),
  };
  // Tracing tools follow the request's trace into the DLQ.
  if (record.envelope.meta.traceparent) headers.traceparent = record.envelope.meta.traceparent;
  return { key: record.envelope.meta.requestId, value: JSON.stringify(record), headers };
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
