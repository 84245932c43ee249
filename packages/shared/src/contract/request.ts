import { z } from 'zod';
import { rfc3339, strictObject } from './fields.ts';
import { httpRequestSchema, relativeUriProblem } from './http-request.ts';
import { parseWith, type SafeParse, safeParseWith } from './issues.ts';
import { type ContractLimits, DEFAULT_CONTRACT_LIMITS, MAX_TRY_COUNT } from './limits.ts';
import { metaSchema } from './meta.ts';
import type { rateSchema } from './policies.ts';

export { METHOD_PATTERN, relativeUriProblem, UNSUPPORTED_METHODS } from './http-request.ts';
export {
  type ContractLimits,
  CREDENTIAL_NAME_PATTERN,
  DEFAULT_CONTRACT_LIMITS,
  DESTINATION_NAME_PATTERN,
  MAX_CLIENT_LENGTH,
  MAX_CONCURRENCY_KEY_LENGTH,
  MAX_CONCURRENCY_LIMIT,
  MAX_DEBOUNCE_KEY_LENGTH,
  MAX_DEBOUNCE_WAIT,
  MAX_ID_LENGTH,
  MAX_LIMITER_RATES,
  MAX_METHOD_LENGTH,
  MAX_RETRY_ATTEMPTS,
  MAX_SIGNING_KEY_ID_LENGTH,
  MAX_TRY_COUNT,
} from './limits.ts';
export {
  concurrencySchema,
  debounceSchema,
  LIMITER_ALGORITHMS,
  type LimiterAlgorithm,
  RETRY_DEFAULTS,
  rateSchema,
  retrySchema,
} from './policies.ts';

/**
 * The request envelope of docs/architecture.md §4: the same JSON on HTTP (`POST /request`) and on Kafka
 * (`in`). Every object is strict, so a misspelt option (`retires`) is an error instead of a
 * silently ignored wish. Its parts: `http-request.ts` (`request`), `meta.ts` (`meta`), `policies.ts`
 * (the policies `meta` asks for), `limits.ts` (the bounds).
 */

/** Attempts a request may make within one retry budget: `meta.retry.max`, or 1 without `retry`. */
export function attemptBudget(envelope: { meta: { retry?: { max: number } | undefined } }): number {
  return envelope.meta.retry?.max ?? 1;
}

/**
 * The service-set counters must leave an attempt to make: the executor would otherwise call the
 * target once more than `meta.retry.max` allows (a producer copying `tryCount` from a result, say).
 */
function checkAttemptCounters(
  envelope: {
    tryCount?: number | undefined;
    retryBase?: number | undefined;
    meta: { retry?: { max: number } | undefined };
  },
  ctx: z.RefinementCtx,
): void {
  const tryCount = envelope.tryCount ?? 0;
  const retryBase = envelope.retryBase ?? 0;
  if (retryBase > tryCount) {
    ctx.addIssue({
      code: 'custom',
      path: ['retryBase'],
      message: 'must not exceed tryCount (attempts made)',
    });
    return;
  }
  const budget = attemptBudget(envelope);
  if (tryCount - retryBase >= budget) {
    const made = envelope.retryBase === undefined ? `${tryCount}` : `${tryCount} − retryBase ${retryBase}`;
    ctx.addIssue({
      code: 'custom',
      path: ['tryCount'],
      message: `leaves no attempt to make: ${made} attempts already made, ${budget} allowed (meta.retry.max, 1 without retry); producers leave tryCount out`,
    });
  }
}

/**
 * A debounced request is put off to the end of its burst and may be superseded: an ordered
 * partition's head would hold every later record of the partition meanwhile, and a request
 * scheduled for an instant would have two clocks deciding when it runs.
 */
function checkDebounce(
  envelope: { meta: { debounce?: unknown; partition?: string | undefined; scheduled?: string | undefined } },
  ctx: z.RefinementCtx,
): void {
  if (envelope.meta.debounce === undefined) return;
  if (isOrderedPartition(envelope.meta.partition))
    ctx.addIssue({
      code: 'custom',
      path: ['meta', 'debounce'],
      message:
        'cannot be used with an ordered ("!") partition: its head would hold the partition for the burst',
    });
  if (envelope.meta.scheduled !== undefined)
    ctx.addIssue({
      code: 'custom',
      path: ['meta', 'debounce'],
      message: 'cannot be used with meta.scheduled: the burst decides when the request runs',
    });
}

/**
 * `request.uri` is absolute, or, with `meta.destination`, relative to the destination (and then
 * never empty, nor with `meta.credentials`: the destination's credential is the operator's).
 */
function checkUri(
  envelope: {
    request: { uri: string };
    meta: { destination?: string | undefined; credentials?: string | undefined };
  },
  ctx: z.RefinementCtx,
): void {
  const { uri } = envelope.request;
  if (envelope.meta.destination === undefined) {
    if (uri.startsWith('/'))
      ctx.addIssue({
        code: 'custom',
        path: ['request', 'uri'],
        message:
          'must be an absolute http(s) URL, or empty for a wake-up (a relative URI needs meta.destination)',
      });
    return;
  }
  // A relative URI's problems were reported by the field; an absolute one or a wake-up has no place here.
  if (!uri.startsWith('/'))
    ctx.addIssue({
      code: 'custom',
      path: ['request', 'uri'],
      message: relativeUriProblem(uri) ?? 'must be relative',
    });
  if (envelope.meta.credentials !== undefined)
    ctx.addIssue({
      code: 'custom',
      path: ['meta', 'credentials'],
      message: 'a request naming a destination uses the destination’s credential: leave meta.credentials out',
    });
}

export function createRequestEnvelopeSchema(limits: Partial<ContractLimits> = {}) {
  const effective = { ...DEFAULT_CONTRACT_LIMITS, ...limits };
  return strictObject({
    request: httpRequestSchema(effective),
    meta: metaSchema(effective),
    tryCount: z
      .number()
      .int()
      .min(0)
      .max(MAX_TRY_COUNT)
      .meta({
        description:
          'Set by the service on the Kafka copy: attempts already made (0 or absent = none yet). Producers leave it out.',
      })
      .optional(),
    createdAt: rfc3339('Set by the service on the Kafka copy: when the request was accepted.').optional(),
    waitTime: z
      .number()
      .int()
      .min(0)
      .meta({
        description:
          'Set by the service on the Kafka copy of a rescheduled request: nanoseconds already spent waiting for rate limits or an open circuit breaker (reported as meta.waitTime). Producers leave it out.',
      })
      .optional(),
    retryBase: z
      .number()
      .int()
      .min(0)
      .max(MAX_TRY_COUNT)
      .meta({
        description:
          'Set by `requester dlq replay`: attempts made before the replay. `meta.retry.max` and the backoff count attempts from here, so a replayed request gets a fresh retry budget while `tryCount` keeps growing. Producers leave it out.',
      })
      .optional(),
    withinHorizon: z
      .literal(true)
      .meta({
        description:
          'Set by the service on the Kafka copy of a request whose API key lacks the `schedule` scope: no wait of the task (retry pause, a target’s Retry-After, rate limiter, circuit breaker) lasts longer than the service’s REDIS_HORIZON. Producers leave it out.',
      })
      .optional(),
  })
    .superRefine(checkAttemptCounters)
    .superRefine(checkUri)
    .superRefine(checkDebounce)
    .meta({
      title: 'RequestEnvelope',
      description:
        'A request for Requester: the value of a record on the `in` topic, or the body of POST /request. Kafka key: meta.partition when set, else meta.requestId.',
    });
}

export const requestEnvelopeSchema = createRequestEnvelopeSchema();

/** What a producer may send (defaults not yet applied). */
export type RequestEnvelopeInput = z.input<typeof requestEnvelopeSchema>;
/** A validated envelope, defaults applied (`request.method`, retry fields). */
export type RequestEnvelope = z.output<typeof requestEnvelopeSchema>;
export type HttpRequestSpec = RequestEnvelope['request'];
export type RequestMeta = RequestEnvelope['meta'];
export type LimiterSpec = NonNullable<RequestMeta['limiter']>;
export type RateSpec = LimiterSpec['rates'][number];
export type RetrySpec = NonNullable<RequestMeta['retry']>;
export type CacheSpec = NonNullable<RequestMeta['cache']>;
export type SigningSpec = NonNullable<RequestMeta['signing']>;
export type RateInput = z.input<typeof rateSchema>;

export interface RequestContract {
  schema: typeof requestEnvelopeSchema;
  parse(input: unknown): RequestEnvelope;
  safeParse(input: unknown): SafeParse<RequestEnvelope>;
}

/** A validator with custom size limits (e.g. from config); build it once, not per request. */
export function createRequestContract(limits: Partial<ContractLimits> = {}): RequestContract {
  const schema = createRequestEnvelopeSchema(limits);
  return {
    schema,
    parse: (input) => parseWith(schema, input),
    safeParse: (input) => safeParseWith(schema, input),
  };
}

/** Validates with the default limits; throws a ValidationError naming every bad field by path. */
export function parseRequestEnvelope(input: unknown): RequestEnvelope {
  return parseWith(requestEnvelopeSchema, input);
}

export function safeParseRequestEnvelope(input: unknown): SafeParse<RequestEnvelope> {
  return safeParseWith(requestEnvelopeSchema, input);
}

/** A partition whose key starts with `!` is ordered: its tasks never overtake each other. */
export function isOrderedPartition(partition: string | undefined): boolean {
  return partition?.startsWith('!') === true;
}

/** Kafka key on `in`: the partition keeps one key on one Kafka partition, so order survives. */
export function kafkaKeyFor(envelope: Pick<RequestEnvelope, 'meta'>): string {
  return envelope.meta.partition ?? envelope.meta.requestId;
}

/**
 * Attempts made within the current retry budget: `tryCount` (attempts made, absolute) minus the
 * `retryBase` a DLQ replay set. The executor compares this with `meta.retry.max` and uses it as
 * the backoff exponent, so a replay starts a fresh budget with a fresh backoff.
 */
export function attemptsInBudget(envelope: Pick<RequestEnvelope, 'retryBase'>, tryCount: number): number {
  return Math.max(0, tryCount - (envelope.retryBase ?? 0));
}

/** A wake-up carries no target: the service answers it with a synthetic 200. */
export function isWakeUp(envelope: Pick<RequestEnvelope, 'request'>): boolean {
  return envelope.request.uri === '';
}
