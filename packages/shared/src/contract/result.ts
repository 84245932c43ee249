import { z } from 'zod';
import type { ErrorCode, ValidationError } from '../errors/index.ts';
import { boundedJson, printableId } from './fields.ts';
import { type FieldIssue, parseWith, type SafeParse, safeParseWith } from './issues.ts';
import { DEFAULT_CONTRACT_LIMITS, isWakeUp, MAX_ID_LENGTH, type RequestEnvelope } from './request.ts';

/**
 * The result envelope of docs/architecture.md §4: the value on `out` (keyed by requestId) and the body of a
 * sync reply. Objects here are not strict: the service writes them, and readers must tolerate
 * fields added later, so unknown keys are dropped on parse instead of failing old consumers.
 *
 * Times are integer nanoseconds, as in the original Go service. They travel as JSON numbers,
 * which are exact only up to 2^53 − 1 ns (~104 days); the builders clamp there.
 */

const requestIdField = printableId(MAX_ID_LENGTH, 'The requestId of the request this answers.');

function wireNs(description: string) {
  return z
    .number()
    .int()
    .min(0)
    .meta({
      description: `${description} Integer nanoseconds (exact up to 2^53−1 ns ≈ 104 days; clamped above).`,
    });
}

const headersField = z.record(z.string(), z.string()).meta({
  description: 'Response headers, name → value (repeated headers joined as the HTTP client reports them).',
});

const fieldIssueSchema = z
  .object({
    path: z.string().meta({ description: 'Dotted path of the offending field, e.g. meta.retry.delay.' }),
    message: z.string().meta({ description: 'What is wrong with it.' }),
  })
  .meta({ title: 'FieldIssue', description: 'One contract violation.' });

export const recordRefSchema = z
  .object({
    topic: z.string().meta({ description: 'Kafka topic.' }),
    partition: z.number().int().min(0).meta({ description: 'Kafka partition.' }),
    offset: z
      .string()
      .regex(/^[0-9]+$/)
      .meta({ description: 'Kafka offset, as a decimal string (int64).' }),
  })
  .meta({
    title: 'RecordRef',
    description: 'For errors about a record of `in` (e.g. unreadable input): where that record is.',
  });

const resultErrorSchema = z
  .object({
    code: z
      .string()
      .regex(/^[a-z][a-z0-9_]*$/)
      .meta({
        description:
          'Stable machine code: invalid_request, payload_too_large, timeout, transport_error, target_refused, credential_unknown, credential_revoked, credential_unavailable, credential_origin_refused, record_expired, dependency_unavailable, cancelled, expired, debounced, internal...',
      }),
    message: z.string().meta({ description: 'Human explanation; not stable, do not parse.' }),
    issues: z
      .array(fieldIssueSchema)
      .meta({ description: 'For invalid_request: every offending field.' })
      .optional(),
    source: recordRefSchema.optional(),
  })
  .meta({
    title: 'ResultError',
    description: 'Present when the service, not the target, produced the status.',
  });

const responseSchema = z
  .object({
    status: z
      .number()
      .int()
      .min(100)
      .max(599)
      .meta({ description: 'HTTP status of the target, or synthetic.' }),
    body: z.string().meta({ description: 'Response body as text.' }),
    headers: headersField,
  })
  .meta({ title: 'HttpResponse', description: 'The target’s answer, or a synthetic one (wake-up, error).' });

const resultMetaSchema = z
  .object({
    requestId: requestIdField.optional().meta({
      description: 'The requestId of the request; absent only when an invalid request had none readable.',
    }),
    tryCount: z
      .number()
      .int()
      .min(0)
      .meta({ description: 'Attempts made, this one included (1 = first try); 0 when none was made.' }),
    time: wireNs('Duration of the attempt that produced this result (0 for synthetic results).'),
    cached: z.boolean().meta({ description: 'Served from the response cache.' }),
    coalesced: z
      .literal(true)
      .meta({
        description:
          'This request made no call: it joined the call another request with the same `meta.cache.key` was making at that moment, and carries that call’s outcome (`cached` is then false). Absent otherwise.',
      })
      .optional(),
    waitTime: wireNs('Time spent waiting on the rate limiter before the call.'),
    proxyData: z.unknown().meta({ description: 'The request’s proxyData, echoed untouched.' }).optional(),
    client: z
      .string()
      .meta({ description: 'The request’s meta.client (over HTTP: the name of the API key that sent it).' })
      .optional(),
    destination: z
      .object({
        name: z.string().meta({ description: 'The destination the request named (`meta.destination`).' }),
        version: z
          .number()
          .int()
          .min(1)
          .meta({ description: 'The version of the destination whose policy applied to the attempt.' }),
        limiters: z
          .array(z.enum(['caller', 'destination']))
          .meta({
            description:
              'The rate limits the call was made under, in the order taken: `caller` (the request’s own `meta.limiter`, scoped to its client), `destination` (the destination’s quota, one for every caller). With both, a call is made only when both grant. Absent when none applied.',
          })
          .optional(),
        retryMax: z
          .number()
          .int()
          .min(1)
          .meta({
            description:
              'Attempts in total the retry policy allowed: the destination’s `retry.max`, or the caller’s `meta.retry.max` when lower. Absent: the destination has no retry policy, so one attempt.',
          })
          .optional(),
        timeout: z
          .string()
          .meta({
            description:
              'The attempt timeout that applied: the destination’s, or the caller’s `meta.timeout` when shorter. Absent: the service’s TARGET_RESPONSE_TIMEOUT.',
          })
          .optional(),
        lowered: z
          .array(z.enum(['retry', 'timeout']))
          .meta({
            description:
              'Where the caller’s own ask, lower than the destination’s, applied: `retry` (fewer attempts or longer pauses than the destination’s retry policy), `timeout` (a shorter attempt timeout). Absent: the destination’s own retries and timeout applied.',
          })
          .optional(),
      })
      .meta({
        description:
          'Set when the request named a destination: which one, and the version whose base URL, headers, credential, limits and retries applied (the operator’s, pinned; see the request’s meta.destination).',
      })
      .optional(),
    error: resultErrorSchema.optional(),
    cancelled: z
      .object({
        by: z.string().meta({
          description:
            'Who took the request back: `client:<API key name>` (its owner, DELETE /requests/{id}), an admin key’s name, or `cli:<os user>`.',
        }),
        at: z.string().meta({ description: 'When the cancel was recorded (RFC 3339, UTC).' }),
      })
      .meta({
        title: 'Cancellation',
        description:
          'Present on the one result of a cancelled request (status 499, `error.code` cancelled): no attempt is made after the cancel.',
      })
      .optional(),
    debounced: z
      .object({
        by: z
          .string()
          .meta({ description: 'The requestId of the newer request of the key that replaced it.' }),
      })
      .meta({
        title: 'Debounced',
        description:
          'Present on the one result of a request a newer one of its debounce key replaced (status 409, `error.code` debounced, meta.debounce): no attempt was made.',
      })
      .optional(),
    traceId: z
      .string()
      .regex(/^[0-9a-f]{32}$/)
      .meta({
        description:
          'W3C trace id of the request’s trace (the caller’s `traceparent`, else one the service started): look the request up in a tracing backend by it.',
      })
      .optional(),
  })
  .meta({ title: 'ResultMeta', description: 'What happened to the request.' });

export const resultEnvelopeSchema = z.object({ response: responseSchema, meta: resultMetaSchema }).meta({
  title: 'ResultEnvelope',
  description:
    'The outcome of a request: the value of a record on the `out` topic (key: meta.requestId) and the body of a sync reply. Readers must ignore unknown fields.',
});

export type ResultEnvelope = z.output<typeof resultEnvelopeSchema>;
export type HttpResponseSpec = ResultEnvelope['response'];
export type ResultMeta = ResultEnvelope['meta'];
export type ResultError = NonNullable<ResultMeta['error']>;
export type RecordRef = NonNullable<ResultError['source']>;

export function parseResultEnvelope(input: unknown): ResultEnvelope {
  return parseWith(resultEnvelopeSchema, input);
}

export function safeParseResultEnvelope(input: unknown): SafeParse<ResultEnvelope> {
  return safeParseWith(resultEnvelopeSchema, input);
}

/** Nanoseconds as a wire integer: rounded, never negative, clamped to the JSON-safe range. */
function toWireNs(ns: number | undefined): number {
  if (ns === undefined || !Number.isFinite(ns) || ns <= 0) return 0;
  return Math.min(Math.round(ns), Number.MAX_SAFE_INTEGER);
}

export interface ResultInit {
  requestId: string | undefined;
  status: number;
  body?: string;
  headers?: Record<string, string>;
  tryCount: number;
  timeNs?: number;
  waitTimeNs?: number;
  cached?: boolean;
  /** The outcome of another request's call, joined in flight (the cache's singleflight). */
  coalesced?: boolean;
  proxyData?: unknown;
  error?: ResultError;
}

/** Assembles a result envelope; optional parts are left out rather than written as undefined. */
export function buildResult(init: ResultInit): ResultEnvelope {
  const meta: ResultMeta = {
    ...(init.requestId === undefined ? {} : { requestId: init.requestId }),
    tryCount: init.tryCount,
    time: toWireNs(init.timeNs),
    cached: init.cached ?? false,
    ...(init.coalesced ? { coalesced: true as const } : {}),
    waitTime: toWireNs(init.waitTimeNs),
    ...(init.proxyData === undefined ? {} : { proxyData: init.proxyData }),
    ...(init.error === undefined ? {} : { error: init.error }),
  };
  return { response: { status: init.status, body: init.body ?? '', headers: init.headers ?? {} }, meta };
}

/** The HTTP status a synthetic error result carries, by error code. */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = Object.freeze({
  invalid_request: 400,
  payload_too_large: 413,
  not_found: 404,
  cancelled: 499,
  expired: 504,
  debounced: 409,
  unauthorized: 401,
  forbidden: 403,
  rate_limited: 429,
  unsupported_media_type: 415,
  request_id_conflict: 409,
  overloaded: 503,
  invalid_usage: 400,
  timeout: 504,
  transport_error: 502,
  target_refused: 502,
  credential_unknown: 400,
  credential_revoked: 403,
  credential_unavailable: 502,
  credential_origin_refused: 403,
  dependency_unavailable: 503,
  record_expired: 500,
  invalid_config: 500,
  internal: 500,
});

export interface ErrorResultExtra {
  /** Overrides the status implied by the code. */
  status?: number;
  tryCount?: number;
  timeNs?: number;
  waitTimeNs?: number;
  /** A failure of another request's call, joined in flight. */
  coalesced?: boolean;
  proxyData?: unknown;
  issues?: ReadonlyArray<FieldIssue>;
  /** The `in` record the error is about, for the producer to find it. */
  source?: RecordRef;
}

/** A synthetic result for a failure of the service itself (invalid input, transport, internal). */
export function errorResult(
  requestId: string | undefined,
  code: ErrorCode,
  message: string,
  extra: ErrorResultExtra = {},
): ResultEnvelope {
  const error: ResultError = {
    code,
    message,
    ...(extra.issues ? { issues: [...extra.issues] } : {}),
    ...(extra.source ? { source: extra.source } : {}),
  };
  return buildResult({
    requestId,
    status: extra.status ?? ERROR_STATUS[code],
    tryCount: extra.tryCount ?? 0,
    timeNs: extra.timeNs,
    waitTimeNs: extra.waitTimeNs,
    coalesced: extra.coalesced,
    proxyData: extra.proxyData,
    error,
  });
}

const proxyDataField = boundedJson(DEFAULT_CONTRACT_LIMITS.maxProxyDataBytes, 'proxyData');

/** Reads `meta[key]` of an unvalidated input, if there is such an object. */
function rawMetaField(input: unknown, key: string): unknown {
  if (typeof input !== 'object' || input === null) return undefined;
  const meta = (input as { meta?: unknown }).meta;
  if (typeof meta !== 'object' || meta === null) return undefined;
  return (meta as Record<string, unknown>)[key];
}

/**
 * The 400-class result for input that failed validation, keyed by its requestId and carrying
 * its proxyData when those two fields are themselves valid, so the producer can still route it.
 */
export function invalidRequestResult(input: unknown, error: ValidationError): ResultEnvelope {
  const requestId = requestIdField.safeParse(rawMetaField(input, 'requestId'));
  const proxyData = proxyDataField.safeParse(rawMetaField(input, 'proxyData'));
  return errorResult(requestId.success ? requestId.data : undefined, 'invalid_request', error.message, {
    proxyData: proxyData.success ? proxyData.data : undefined,
    issues: error.issues,
  });
}

/**
 * The error result of an `in` record that is not valid UTF-8, from the record read with each bad
 * sequence replaced by U+FFFD (`lossyInput`): keyed by its requestId and carrying its proxyData
 * only when those hold no U+FFFD, so that it finds its caller and echoes nothing changed.
 */
export function notUtf8Result(lossyInput: unknown, source?: RecordRef): ResultEnvelope {
  const intact = (value: unknown) => !JSON.stringify(value)?.includes('\uFFFD');
  const requestId = requestIdField.safeParse(rawMetaField(lossyInput, 'requestId'));
  const proxyData = proxyDataField.safeParse(rawMetaField(lossyInput, 'proxyData'));
  return errorResult(
    requestId.success && intact(requestId.data) ? requestId.data : undefined,
    'invalid_request',
    'the record is not valid UTF-8: a request is JSON text in UTF-8 (encode a binary body yourself, e.g. base64)',
    {
      proxyData: proxyData.success && intact(proxyData.data) ? proxyData.data : undefined,
      ...(source ? { source } : {}),
    },
  );
}

/** A wake-up's synthetic 200: the request's own body and headers come back. */
export function wakeUpResult(
  envelope: RequestEnvelope,
  progress: { tryCount: number; waitTimeNs?: number },
): ResultEnvelope {
  if (!isWakeUp(envelope)) throw new TypeError('wakeUpResult needs a wake-up request (empty request.uri)');
  return buildResult({
    requestId: envelope.meta.requestId,
    status: 200,
    body: envelope.request.body ?? '',
    headers: envelope.request.headers ?? {},
    tryCount: progress.tryCount,
    waitTimeNs: progress.waitTimeNs,
    proxyData: envelope.meta.proxyData,
  });
}
