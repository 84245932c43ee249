import { z } from 'zod';
import { tryParseDuration } from '../time/duration.ts';
import { deadlineField } from './deadline.ts';
import { boundedJson, goDuration, printableId, rfc3339, strictObject, traceparent } from './fields.ts';
import { outgoingHeaders } from './headers.ts';
import { parseWith, type SafeParse, safeParseWith } from './issues.ts';
import { LIMITER_NEEDS_WINDOW_OR_QUOTA, quotaSchema, smallestLimiterValue } from './quota.ts';

/**
 * The request envelope of docs/architecture.md §4: the same JSON on HTTP (`POST /request`) and on Kafka
 * (`in`). Every object is strict, so a misspelt option (`retires`) is an error instead of a
 * silently ignored wish.
 */

/** Size limits an operator may tune (e.g. from config); the JSON Schema publishes the defaults. */
export interface ContractLimits {
  /** UTF-8 bytes of `request.body`. */
  maxBodyBytes: number;
  maxHeaderCount: number;
  /** Sum of the lengths of every header name and value. */
  maxHeadersBytes: number;
  /** UTF-8 bytes of `meta.proxyData` serialized as JSON. */
  maxProxyDataBytes: number;
  maxUriLength: number;
}

export const DEFAULT_CONTRACT_LIMITS: Readonly<ContractLimits> = Object.freeze({
  maxBodyBytes: 1024 * 1024,
  maxHeaderCount: 100,
  maxHeadersBytes: 64 * 1024,
  maxProxyDataBytes: 64 * 1024,
  maxUriLength: 8 * 1024,
});

/** requestId, partition, limiter and cache keys: bounded so Redis/Kafka keys stay small. */
export const MAX_ID_LENGTH = 256;
export const MAX_SIGNING_KEY_ID_LENGTH = 128;
export const MAX_LIMITER_RATES = 8;
export const MAX_RETRY_ATTEMPTS = 100;
/**
 * Bound of the service-set attempt counters (`tryCount`, `retryBase`): with a full retry budget on
 * top, a result's `tryCount` still fits an int32 in any consumer's language.
 */
export const MAX_TRY_COUNT = 2_147_483_647 - MAX_RETRY_ATTEMPTS;
export const MAX_METHOD_LENGTH = 32;
/** A credential's name (`meta.credentials`, `requester credentials create <name>`). */
export const CREDENTIAL_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export const LIMITER_ALGORITHMS = [
  'token-bucket',
  'leaky-bucket',
  'fixed-window-counter',
  'sliding-window-log',
  'sliding-window-counter',
] as const;
export type LimiterAlgorithm = (typeof LIMITER_ALGORITHMS)[number];

/** Upper-case RFC 9110 token: methods are case-sensitive and every standard one is upper-case. */
export const METHOD_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Z-]+$";
/** Methods fetch/undici refuse outright; better a 400 now than a 5xx after the queue. */
export const UNSUPPORTED_METHODS: ReadonlySet<string> = new Set(['CONNECT', 'TRACE', 'TRACK']);

/** WHATWG URL parsing silently strips or encodes these; a URI carrying them is a caller bug. */
function hasWhitespaceOrControl(text: string): boolean {
  if (/\s/.test(text)) return true;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

function uriProblem(uri: string): string | undefined {
  if (uri === '') return undefined; // wake-up: no HTTP call
  if (hasWhitespaceOrControl(uri)) return 'must not contain whitespace or control characters';
  const url = URL.parse(uri); // once: canParse then new URL parsed every request's URI twice
  if (!url) return 'must be an absolute http(s) URL, or empty for a wake-up';
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `scheme "${url.protocol.slice(0, -1)}" is not supported (http or https only)`;
  }
  // WHATWG parsing forgives `http:/host` and `http:\\host`; the published pattern does not, nor do we.
  if (!/^https?:\/\//i.test(uri)) return 'must start with http:// or https://';
  if (url.hostname === '') return 'must name a host';
  return undefined;
}

/** A destination's name (`meta.destination`, `requester destinations create <name>`). */
export const DESTINATION_NAME_PATTERN = CREDENTIAL_NAME_PATTERN;

/**
 * Why `uri` cannot be the relative URI of a request naming a destination, or undefined: a path
 * from the root (`/v2/invoices?x=1`), which the destination's base URL then prefixes. Anything
 * that could leave the base URL is refused: an absolute URI or a scheme-relative one (`//host`),
 * a backslash, and a `.` or `..` segment, written plainly or percent-encoded (a target's server
 * may decode it before routing).
 */
export function relativeUriProblem(uri: string): string | undefined {
  if (uri === '') return 'must be a path relative to the destination, e.g. /v2/invoices?x=1';
  if (hasWhitespaceOrControl(uri)) return 'must not contain whitespace or control characters';
  if (!uri.startsWith('/') || uri.startsWith('//'))
    return 'must be a path relative to the destination, starting with a single "/" (no absolute URI: the destination names the host)';
  if (uri.includes('\\')) return 'must not contain a backslash';
  const path = uri.split(/[?#]/, 1)[0] as string;
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return 'has a malformed percent-encoding';
  }
  if ([path, decoded].some((p) => p.split('/').some((segment) => segment === '..' || segment === '.')))
    return 'must not contain "." or ".." segments: a path may not leave the destination\'s base URL';
  return undefined;
}

function uriField(limits: ContractLimits) {
  return z
    .string()
    .max(limits.maxUriLength, { abort: true })
    .superRefine((uri, ctx) => {
      // A relative URI is judged with meta.destination (checkUri), once the envelope is whole.
      const problem = uri.startsWith('/') ? relativeUriProblem(uri) : uriProblem(uri);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .meta({
      description:
        'Target URL, absolute http or https. An empty string makes a wake-up: no HTTP call is made and body/headers come back in a synthetic 200 (with `scheduled` and `proxyData`, an alarm clock). With `meta.destination`, a path relative to the destination’s base URL instead (`/v2/invoices?x=1`).',
      pattern: '^$|^[Hh][Tt][Tt][Pp][Ss]?://[^\\s]+$|^/[^\\s]*$',
      maxLength: limits.maxUriLength,
    });
}

function methodField() {
  return z
    .string()
    .max(MAX_METHOD_LENGTH, { abort: true })
    .regex(new RegExp(METHOD_PATTERN), {
      error: 'must be an upper-case HTTP method token, e.g. GET, POST',
      abort: true,
    })
    .refine((method) => !UNSUPPORTED_METHODS.has(method), {
      error: (issue) => `method ${String(issue.input)} is not supported by the HTTP client`,
    })
    .default('GET')
    .meta({ description: 'HTTP method, upper-case (GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS...).' });
}

function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

function bodyField(limits: ContractLimits) {
  const limit = limits.maxBodyBytes;
  return z
    .string()
    .max(limit, { abort: true, error: `is larger than the limit of ${limit} bytes` })
    .refine((body) => utf8Bytes(body) <= limit, {
      error: (issue) =>
        `is ${utf8Bytes(String(issue.input))} bytes (UTF-8), over the limit of ${limit} bytes`,
    })
    .meta({
      description: `Request body as a string (encode binary yourself, e.g. base64). At most ${limit} bytes in UTF-8.`,
      maxLength: limit,
    });
}

function httpRequestSchema(limits: ContractLimits) {
  return strictObject({
    uri: uriField(limits),
    method: methodField(),
    body: bodyField(limits).optional(),
    headers: outgoingHeaders(limits, 'Request headers, name → value.').optional(),
  }).meta({ title: 'HttpRequest', description: 'The HTTP call to make on the caller’s behalf.' });
}

export const rateSchema = strictObject({
  duration: goDuration('at-least-1ms', 'Window length (the limiter counts whole milliseconds).'),
  value: z.number().int().positive().meta({ description: 'Calls allowed per window.' }),
}).meta({ title: 'Rate', description: 'One window of a limiter: at most `value` calls per `duration`.' });

/**
 * A limiter needs a window or a quota; a cost above the smallest of their values would wait
 * forever: refused at the door rather than dead-lettered later.
 */
function checkLimiterCost(
  limiter: {
    cost?: number | undefined;
    rates: ReadonlyArray<{ value: number }>;
    quota?: { value: number } | undefined;
  },
  ctx: z.RefinementCtx,
): void {
  if (limiter.rates.length === 0 && limiter.quota === undefined) {
    ctx.addIssue({ code: 'custom', path: ['rates'], message: 'needs at least one window, or a quota' });
    return;
  }
  const smallest = smallestLimiterValue(limiter);
  if (limiter.cost !== undefined && limiter.cost > smallest)
    ctx.addIssue({
      code: 'custom',
      path: ['cost'],
      message: `must not exceed the smallest ${limiter.quota ? "window's or quota's" : "window's"} value (${limiter.cost} > ${smallest}): the limiter could never admit it`,
    });
}

const limiterSchema = strictObject({
  key: printableId(
    MAX_ID_LENGTH,
    'Limiter identity, the client’s own: the requests of one client (meta.client) naming this key share its quota; another client’s same key is another limiter, unless the operator declared the key shared (SHARED_LIMITER_KEYS): then every request naming it shares one quota.',
  ),
  algorithm: z.enum(LIMITER_ALGORITHMS).meta({ description: 'Rate-limiting algorithm.' }),
  rates: z.array(rateSchema).max(MAX_LIMITER_RATES).default([]).meta({
    description:
      'Every window must allow the call; they are checked and consumed atomically. At least one, unless a `quota` is given.',
  }),
  cost: z
    .number()
    .int()
    .min(1)
    .meta({
      description:
        'Units this request counts for in every window and the quota (tokens, rows, pages), 1 when absent. At most the smallest window’s or quota’s `value`: a larger cost could never be admitted.',
      default: 1,
    })
    .optional(),
  quota: quotaSchema.optional(),
})
  .superRefine(checkLimiterCost)
  .meta({
    title: 'Limiter',
    description: 'Rate limit protecting the target’s quota.',
    anyOf: LIMITER_NEEDS_WINDOW_OR_QUOTA,
  });

function durationNs(text: string): bigint | undefined {
  const parsed = tryParseDuration(text);
  return parsed.ok ? parsed.ns : undefined;
}

/** `maxDelay` below `delay` would silently cap every pause; refuse it instead. */
function checkRetryBounds(retry: { delay: string; maxDelay: string }, ctx: z.RefinementCtx): void {
  const delay = durationNs(retry.delay);
  const maxDelay = durationNs(retry.maxDelay);
  if (delay !== undefined && maxDelay !== undefined && maxDelay < delay) {
    ctx.addIssue({
      code: 'custom',
      path: ['maxDelay'],
      message: `must not be shorter than delay (${retry.maxDelay} < ${retry.delay})`,
    });
  }
}

/** Retry defaults, applied when `retry` is present but leaves a field out. */
export const RETRY_DEFAULTS = Object.freeze({ delay: '1s', maxDelay: '5m', multiplier: 2, jitter: 0.2 });

export const retrySchema = strictObject({
  max: z
    .number()
    .int()
    .min(1)
    .max(MAX_RETRY_ATTEMPTS)
    .meta({ description: 'Attempts in total, the first included (1 = no retry).' }),
  delay: goDuration('non-negative', 'Pause before the first retry.').default(RETRY_DEFAULTS.delay),
  maxDelay: goDuration(
    'positive',
    'Upper bound of any backoff pause. A target’s Retry-After may ask for longer; it is honoured up to the service’s RETRY_AFTER_MAX.',
  ).default(RETRY_DEFAULTS.maxDelay),
  multiplier: z
    .number()
    .min(1)
    .default(RETRY_DEFAULTS.multiplier)
    .meta({ description: 'Each pause is the previous one times this (exponential backoff).' }),
  jitter: z
    .number()
    .min(0)
    .max(1)
    .default(RETRY_DEFAULTS.jitter)
    .meta({ description: 'Random fraction of each pause added or removed (0 = none, 1 = up to ±100%).' }),
})
  .superRefine(checkRetryBounds)
  .meta({ title: 'Retry', description: 'Retries with exponential backoff and jitter.' });

const cacheSchema = strictObject({
  key: printableId(
    MAX_ID_LENGTH,
    'Cache key, the client’s own (another client’s same key is another entry). An entry answers only the request it stored (method, URL, headers, body): another request under the key is a miss. Only 2xx responses are stored.',
  ),
  ttl: goDuration('positive', 'How long a stored response is served.'),
}).meta({ title: 'Cache', description: 'Response cache: a hit answers without calling the target.' });

const signingSchema = strictObject({
  keyId: printableId(
    MAX_SIGNING_KEY_ID_LENGTH,
    "Id of a signing key kept by the service (a signing credential: `requester credentials create <id> --signing-secret-file`); secrets never travel in requests. The API key must list the id in its credentials scope (on Kafka: the claimed Kafka-entry client's key, or KAFKA_ANONYMOUS_CREDENTIALS), and a key of the store signs only for the origins it is bound to.",
  ),
}).meta({ title: 'Signing', description: 'Sign the outgoing request (HMAC) with a server-side key.' });

const credentialsField = z
  .string()
  .regex(CREDENTIAL_NAME_PATTERN, {
    error:
      "must be a credential name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
  })
  .meta({
    description:
      "Name of a target credential kept by the service (`requester credentials create`): an OAuth2 client-credentials grant whose access token is sent as `Authorization: Bearer`, a client certificate (mTLS), an egress proxy. Only the name travels; the secrets never leave the service. The API key must list the name in its credentials scope (on Kafka: the claimed Kafka-entry client's key, or KAFKA_ANONYMOUS_CREDENTIALS), and the request's origin must be one the credential is bound to.",
    pattern: CREDENTIAL_NAME_PATTERN.source,
  });

function partitionField() {
  return printableId(
    MAX_ID_LENGTH,
    'Partition key, the client’s own: the requests of one client sharing it share a queue (another client’s same key is another queue). A leading `!` makes it ordered (no overtaking).',
  ).refine((partition) => partition !== '!', { error: 'an ordered partition needs a key after "!"' });
}

/** Longest client name (an API key's name): it is a label of logs, metrics and results. */
export const MAX_CLIENT_LENGTH = 64;

function clientField() {
  return printableId(
    MAX_CLIENT_LENGTH,
    'Who sent the request, echoed in the result. Over HTTP the ingress sets it to the name of the API key and refuses a caller-sent value; on Kafka it is whatever the producer writes (Requester does not authenticate producers: the broker ACLs on `in` decide who may write).',
  );
}

function metaSchema(limits: ContractLimits) {
  return strictObject({
    requestId: printableId(
      MAX_ID_LENGTH,
      'Caller-chosen id, unique per task among the client’s own (another client may use the same id: it names another request); the Kafka key of the result on `out`.',
    ),
    traceparent: traceparent('W3C Trace Context traceparent, continued by the service.').optional(),
    partition: partitionField().optional(),
    sync: z.boolean().meta({ description: 'HTTP only: wait for the result and answer with it.' }).optional(),
    scheduled: rfc3339('Do not execute before this instant.').optional(),
    deadline: deadlineField().optional(),
    proxyData: boundedJson(
      limits.maxProxyDataBytes,
      'Any JSON, echoed in the result as the same JSON value.',
    ).optional(),
    limiter: limiterSchema.optional(),
    retry: retrySchema.optional(),
    cache: cacheSchema.optional(),
    signing: signingSchema.optional(),
    credentials: credentialsField.optional(),
    client: clientField().optional(),
    destination: z
      .string()
      .regex(DESTINATION_NAME_PATTERN, {
        error:
          "must be a destination name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
      })
      .meta({
        description:
          'Name of a destination defined by the operators (`requester destinations create`): `request.uri` is then a path relative to its base URL, and its headers, credential, rate limit and retry policy apply. A caller may ask for fewer retries, never more; its own `limiter` and `credentials` give way to the destination’s. The result’s `meta.destination` says which version applied.',
        pattern: DESTINATION_NAME_PATTERN.source,
      })
      .optional(),
  }).meta({ title: 'RequestMeta', description: 'How, when and under which policies to make the call.' });
}

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
