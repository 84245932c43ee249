import {
  buildResult,
  ERROR_STATUS,
  errorResult,
  type RequestEnvelope,
  type ResultEnvelope,
} from '@requester/shared/contract';
import type { RequesterError } from '@requester/shared/errors';
import type { OutgoingRecord } from '@requester/shared/kafka';
import type { CallOutcome, FailureCode } from '../http/index.ts';

/**
 * Result envelopes of the executor (docs/architecture.md §4). Synthetic statuses for failures of the path to
 * the target: 504 when it did not answer in time, 502 for anything else on the way (refused,
 * reset, DNS, TLS, refused by the SSRF guard, a response over the size cap); `meta.error` says which.
 */
const FAILURE_STATUS: Record<FailureCode, number> = {
  timeout: ERROR_STATUS.timeout,
  transport_error: ERROR_STATUS.transport_error,
  target_refused: ERROR_STATUS.target_refused,
  // The target answered, but more than we keep: a bad gateway, not the caller's 413.
  payload_too_large: 502,
  // The request's credential (credentials/): none of that name, revoked, or its token endpoint failed.
  credential_unknown: ERROR_STATUS.credential_unknown,
  credential_revoked: ERROR_STATUS.credential_revoked,
  credential_unavailable: ERROR_STATUS.credential_unavailable,
  credential_origin_refused: ERROR_STATUS.credential_origin_refused,
};

/** Where a task stands when its result is written. */
export interface ResultProgress {
  /** Attempts made, this one included. */
  tryCount: number;
  /** Time spent waiting for rate limits and open breakers, in ns (default 0). */
  waitTimeNs?: number;
  /** Answered from the response cache. */
  cached?: boolean;
  /** The outcome of another request's call to the target (joined in flight): `meta.coalesced`. */
  coalesced?: boolean;
}

/** The result of one call: the target's answer, or a synthetic 5xx naming the failure. */
export function callResult(
  envelope: RequestEnvelope,
  outcome: CallOutcome,
  progress: ResultProgress,
): ResultEnvelope {
  const common = {
    tryCount: progress.tryCount,
    timeNs: outcome.durationNs,
    waitTimeNs: progress.waitTimeNs ?? 0,
    coalesced: progress.coalesced ?? false,
    proxyData: envelope.meta.proxyData,
  };
  if (outcome.kind === 'response') {
    return buildResult({
      requestId: envelope.meta.requestId,
      status: outcome.status,
      body: outcome.body,
      headers: outcome.headers,
      cached: progress.cached ?? false,
      ...common,
    });
  }
  const { code, message } = outcome.error;
  return errorResult(envelope.meta.requestId, code, message, { status: FAILURE_STATUS[code], ...common });
}

/**
 * The result for a task whose `in` record cannot be read (expired by retention, or missing):
 * the request is lost to us, so the caller hears it as a 500 instead of never hearing anything.
 */
export function unreadableResult(requestId: string, error: RequesterError, tryCount: number): ResultEnvelope {
  return errorResult(requestId, error.code, error.message, { status: 500, tryCount });
}

/**
 * The result carrying its request's `meta.client`: the sync-gateway answers a result only to the
 * API key of that name, and logs, metrics and dead letters say whose request it was.
 */
export function ownedBy(envelope: RequestEnvelope, result: ResultEnvelope): ResultEnvelope {
  const client = envelope.meta.client;
  return client === undefined ? result : { ...result, meta: { ...result.meta, client } };
}

/** Room left in a record for its key, headers and framing besides the value. */
const RECORD_OVERHEAD_BYTES = 1024;

/**
 * The `out` record of a result: keyed by requestId (docs/architecture.md §4). A result whose record would
 * not fit in `maxRecordBytes` (KAFKA_MAX_MESSAGE_BYTES) is answered as too large instead (see
 * tooLargeResultMessage). A body is capped by TARGET_MAX_RESPONSE_BYTES, but JSON escaping can
 * make it several times bigger.
 */
export function resultMessage(
  result: ResultEnvelope,
  maxRecordBytes = Number.POSITIVE_INFINITY,
): OutgoingRecord {
  const value = JSON.stringify(result);
  const bytes = Buffer.byteLength(value);
  if (bytes + RECORD_OVERHEAD_BYTES <= maxRecordBytes) return { key: result.meta.requestId ?? null, value };
  return tooLargeResultMessage(
    result,
    `is ${bytes} bytes, more than KAFKA_MAX_MESSAGE_BYTES (${maxRecordBytes})`,
  );
}

/**
 * The record answering a result that `out` cannot carry: a 502 `payload_too_large` without the
 * body, keeping the request's progress and proxyData. The broker would refuse the result for good,
 * and the task would otherwise go round the queue forever without its caller ever hearing of it.
 * `why` completes "the result (target status N) …".
 */
export function tooLargeResultMessage(result: ResultEnvelope, why: string): OutgoingRecord {
  const { meta, response } = result;
  const message = `the result (target status ${response.status}) ${why}; its body was dropped`;
  const tooLarge = errorResult(meta.requestId, 'payload_too_large', message, {
    status: FAILURE_STATUS.payload_too_large,
    tryCount: meta.tryCount,
    timeNs: meta.time,
    waitTimeNs: meta.waitTime,
    proxyData: meta.proxyData,
  });
  if (meta.client !== undefined) tooLarge.meta.client = meta.client;
  if (meta.traceId !== undefined) tooLarge.meta.traceId = meta.traceId;
  return { key: meta.requestId ?? null, value: JSON.stringify(tooLarge) };
}
