/**
 * The policies a request may ask for in `meta`: limiter, concurrency, retry, cache, signing, credentials.
 *
 * @module
 */

import { z } from 'zod';
import { tryParseDuration } from '../time/duration.ts';
import { goDuration, printableId, strictObject } from './fields.ts';
import {
  CREDENTIAL_NAME_PATTERN,
  MAX_CONCURRENCY_KEY_LENGTH,
  MAX_CONCURRENCY_LIMIT,
  MAX_DEBOUNCE_KEY_LENGTH,
  MAX_DEBOUNCE_WAIT,
  MAX_ID_LENGTH,
  MAX_LIMITER_RATES,
  MAX_RETRY_ATTEMPTS,
  MAX_SIGNING_KEY_ID_LENGTH,
} from './limits.ts';
import { LIMITER_NEEDS_WINDOW_OR_QUOTA, quotaSchema, smallestLimiterValue } from './quota.ts';

export const LIMITER_ALGORITHMS = [
  'token-bucket',
  'leaky-bucket',
  'fixed-window-counter',
  'sliding-window-log',
  'sliding-window-counter',
] as const;
export type LimiterAlgorithm = (typeof LIMITER_ALGORITHMS)[number];

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

export const limiterSchema = strictObject({
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

export const concurrencySchema = strictObject({
  key: printableId(
    MAX_CONCURRENCY_KEY_LENGTH,
    'Concurrency key, the client’s own (as a limiter key): the requests of one client (meta.client) naming this key share its calls in flight; another client’s same key is another one.',
  ),
  limit: z
    .number()
    .int()
    .min(1)
    .max(MAX_CONCURRENCY_LIMIT)
    .meta({ description: 'Most calls in flight for the key across every executor.' }),
}).meta({
  title: 'Concurrency',
  description:
    'At most `limit` calls in flight for `key` across every executor; a task over it waits, without an attempt, for a call of the key to end.',
});

const MAX_DEBOUNCE_WAIT_NS = durationNs(MAX_DEBOUNCE_WAIT) ?? 0n;

/** A `maxWait` below `delay` would cut every burst short of its delay; beyond the cap, the burst is not bounded. */
function checkDebounceBounds(
  debounce: { delay: string; maxWait?: string | undefined },
  ctx: z.RefinementCtx,
): void {
  const delay = durationNs(debounce.delay);
  const maxWait = debounce.maxWait === undefined ? undefined : durationNs(debounce.maxWait);
  if (delay !== undefined && delay > MAX_DEBOUNCE_WAIT_NS)
    ctx.addIssue({ code: 'custom', path: ['delay'], message: `must be at most ${MAX_DEBOUNCE_WAIT}` });
  if (maxWait !== undefined && maxWait > MAX_DEBOUNCE_WAIT_NS)
    ctx.addIssue({ code: 'custom', path: ['maxWait'], message: `must be at most ${MAX_DEBOUNCE_WAIT}` });
  // Below 1ms, its own check said so already.
  else if (delay !== undefined && maxWait !== undefined && maxWait >= 1_000_000n && maxWait < delay)
    ctx.addIssue({
      code: 'custom',
      path: ['maxWait'],
      message: `must not be shorter than delay (${debounce.maxWait} < ${debounce.delay})`,
    });
}

export const debounceSchema = strictObject({
  key: printableId(
    MAX_DEBOUNCE_KEY_LENGTH,
    'Debounce key, the client’s own (as a limiter key): of the requests of one client (meta.client) naming this key within `delay` of each other, only the latest is executed; another client’s same key is another one.',
  ),
  delay: goDuration(
    'at-least-1ms',
    `How long after a request of the key the latest is executed, if none newer came meanwhile; at most ${MAX_DEBOUNCE_WAIT}.`,
  ),
  maxWait: goDuration(
    'at-least-1ms',
    `Longest a burst of the key is put off from its first request: the latest by then is executed, a later one starts a new burst. At least \`delay\`, at most ${MAX_DEBOUNCE_WAIT}; without it, a burst lasts as long as requests keep coming within \`delay\`.`,
  ).optional(),
})
  .superRefine(checkDebounceBounds)
  .meta({
    title: 'Debounce',
    description:
      'Trailing debounce: only the latest request of `key` in a burst is executed, `delay` after it (at most `maxWait` after the burst’s first); each superseded one ends, without an attempt, with one result `debounced` naming the request that replaced it. Not with an ordered (`!`) partition nor with `meta.scheduled`.',
  });

export const timeoutField = goDuration(
  'at-least-1ms',
  'Attempt timeout: a call whose answer is not in within it fails with `timeout` (and is retried as any). At most the service’s TARGET_RESPONSE_TIMEOUT, which applies without it; a destination’s own is the most a caller may ask for.',
);

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

export const cacheSchema = strictObject({
  key: printableId(
    MAX_ID_LENGTH,
    'Cache key, the client’s own (another client’s same key is another entry). An entry answers only the request it stored (method, URL, headers, body): another request under the key is a miss. Only 2xx responses are stored.',
  ),
  ttl: goDuration('positive', 'How long a stored response is served.'),
}).meta({ title: 'Cache', description: 'Response cache: a hit answers without calling the target.' });

export const signingSchema = strictObject({
  keyId: printableId(
    MAX_SIGNING_KEY_ID_LENGTH,
    "Id of a signing key kept by the service (a signing credential: `requester credentials create <id> --signing-secret-file`); secrets never travel in requests. The API key must list the id in its credentials scope (on Kafka: the claimed Kafka-entry client's key, or KAFKA_ANONYMOUS_CREDENTIALS), and a key of the store signs only for the origins it is bound to.",
  ),
}).meta({ title: 'Signing', description: 'Sign the outgoing request (HMAC) with a server-side key.' });

export const credentialsField = z
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
