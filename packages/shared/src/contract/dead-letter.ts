import { z } from 'zod';
import { ValidationError } from '../errors/index.ts';
import { formatRfc3339 } from '../time/rfc3339.ts';
import { rfc3339 } from './fields.ts';
import { parseWith } from './issues.ts';
import {
  createRequestContract,
  MAX_RETRY_ATTEMPTS,
  type RequestContract,
  type RequestEnvelope,
} from './request.ts';
import { type RecordRef, recordRefSchema, resultEnvelopeSchema } from './result.ts';

/**
 * The dead-letter record (DESIGN.md §5 "Exhausted / permanent"): the value of a record on the DLQ
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

const deadLetterShape = {
  envelope: z.record(z.string(), z.unknown()).meta({
    description: 'The request envelope as read from `in` (RequestEnvelope), service-set fields included.',
  }),
  result: resultEnvelopeSchema.meta({
    description: 'The final result, as written to `out` (ResultEnvelope).',
  }),
  reason: z.string().regex(REASON_PATTERN).meta({
    description:
      'Why the request was dead-lettered: retries_exhausted (retryable failures, no attempt left), permanent (a failure retrying cannot fix). Readers must accept other values.',
  }),
  failedAt: rfc3339('When the request was dead-lettered.'),
  source: recordRefSchema.meta({ description: 'The `in` record the request was read from.' }),
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
    'A request that failed for good: the value of a record on the DLQ topic (key: meta.requestId). `requester dlq replay` re-submits its envelope to `in`. Readers must ignore unknown fields.',
});

export type DeadLetter = Omit<z.output<typeof deadLetterSchema>, 'envelope'> & {
  envelope: RequestEnvelope;
};

const defaultContract = createRequestContract();

/**
 * Parses a DLQ record value (Buffer, JSON text or an object); throws a ValidationError naming
 * each bad field (`envelope.meta.requestId`, `failedAt`...). `contract`: the request contract of
 * the deployment, when it runs with non-default size limits.
 */
export function parseDeadLetter(value: unknown, contract: RequestContract = defaultContract): DeadLetter {
  const input = Buffer.isBuffer(value) || typeof value === 'string' ? JSON.parse(String(value)) : value;
  const record = parseWith(deadLetterSchema, input);
  const envelope = contract.safeParse(record.envelope);
  if (!envelope.ok) {
    throw new ValidationError(
      envelope.error.issues.map((i) => ({ ...i, path: i.path ? `envelope.${i.path}` : 'envelope' })),
    );
  }
  return { ...record, envelope: envelope.value };
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
