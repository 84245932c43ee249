import { z } from 'zod';
import { defaultDeadlineProblem } from '../contract/deadline.ts';
import { goDuration, strictObject } from '../contract/fields.ts';
import { outgoingHeaders } from '../contract/headers.ts';
import { parseWith } from '../contract/issues.ts';
import { quotaSchema } from '../contract/quota.ts';
import {
  DEFAULT_CONTRACT_LIMITS,
  DESTINATION_NAME_PATTERN,
  LIMITER_ALGORITHMS,
  MAX_CONCURRENCY_LIMIT,
  MAX_LIMITER_RATES,
  rateSchema,
  retrySchema,
} from '../contract/request.ts';
import { credentialOriginOf } from '../credentials/origins.ts';
import { ValidationError } from '../errors/index.ts';

/**
 * What an operator defines of a destination (docs/architecture.md §10, "Destinations"): where its
 * calls go and the policy they follow, whoever sends them. Kept as JSON in
 * `requester_destinations.spec`, one row per version.
 */

function baseUrlProblem(text: string): string | undefined {
  const url = URL.parse(text);
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '')
    return 'must be an absolute http(s) URL, e.g. https://api.partner.example/v2';
  if (!/^https?:\/\//i.test(text)) return 'must start with http:// or https://';
  if (url.username || url.password || url.search || url.hash)
    return 'must be scheme://host[:port][/path prefix] only: no query, fragment or user';
  if (url.pathname.split('/').some((segment) => segment === '..' || segment === '.'))
    return 'must not contain "." or ".." segments';
  return undefined;
}

const baseUrlField = z
  .string()
  .max(2048)
  .superRefine((text, ctx) => {
    const problem = baseUrlProblem(text);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .transform((text) => normalizeBaseUrl(text))
  .meta({ description: 'Scheme, host, port and path prefix every call of the destination starts with.' });

/** The highest failure threshold a destination's breaker may have. */
export const MAX_BREAKER_THRESHOLD = 1000;

export const destinationSpecSchema = strictObject({
  baseUrl: baseUrlField,
  headers: outgoingHeaders(
    DEFAULT_CONTRACT_LIMITS,
    'Static headers sent with every call, over the caller’s own of the same name.',
  ).optional(),
  secretHeaders: outgoingHeaders(
    DEFAULT_CONTRACT_LIMITS,
    'Static headers whose values are secrets (an API key): stored sealed under the master key, added by the executor at each call, never shown nor written to a topic.',
  ).optional(),
  credentials: z
    .string()
    .regex(DESTINATION_NAME_PATTERN, { error: 'must be a credential name' })
    .meta({ description: 'The credential every call carries; it must be bound to the base URL’s origin.' })
    .optional(),
  limiter: strictObject({
    algorithm: z.enum(LIMITER_ALGORITHMS),
    rates: z.array(rateSchema).max(MAX_LIMITER_RATES).default([]),
    quota: quotaSchema.optional(),
  })
    .refine((limiter) => limiter.rates.length > 0 || limiter.quota !== undefined, {
      path: ['rates'],
      error: 'needs at least one window, or a quota',
    })
    .meta({
      description: 'One quota for every caller of the destination (a caller’s own meta.limiter gives way).',
    })
    .optional(),
  retry: retrySchema.optional(),
  deadline: z
    .string()
    .superRefine((text, ctx) => {
      const problem = defaultDeadlineProblem(text);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .meta({
      description:
        'Default start-by deadline of its requests that give no `meta.deadline`: a Go duration counted from when the task is first due (its `scheduled` instant, else its acceptance). An API key’s default, when earlier, wins.',
    })
    .optional(),
  maxConcurrency: z
    .number()
    .int()
    .min(1)
    .max(MAX_CONCURRENCY_LIMIT)
    .meta({
      description:
        'Most calls in flight to the destination across every executor and caller (a caller’s own meta.concurrency gives way).',
    })
    .optional(),
  timeout: goDuration(
    'at-least-1ms',
    'Attempt timeout of its calls; a caller may ask for a shorter one (meta.timeout), never a longer one.',
  ).optional(),
  maxBodyBytes: z.number().int().positive().max(DEFAULT_CONTRACT_LIMITS.maxBodyBytes).optional(),
  breaker: strictObject({
    failureThreshold: z
      .number()
      .int()
      .min(1)
      .max(MAX_BREAKER_THRESHOLD)
      .meta({
        description: 'Consecutive failures that open the breaker (default BREAKER_FAILURE_THRESHOLD).',
      })
      .optional(),
    openDuration: goDuration(
      'at-least-1ms',
      'How long the opened breaker refuses calls before one probe (default BREAKER_OPEN_DURATION).',
    ).optional(),
    maxOpenDuration: goDuration(
      'at-least-1ms',
      'Cap on the open period while probes fail (default BREAKER_MAX_OPEN_DURATION).',
    ).optional(),
  })
    .meta({
      description:
        'A circuit breaker of its own (`destination <name>`), apart from its origin’s, with these thresholds; a field left out takes the deployment’s. Callers have no breaker setting.',
    })
    .optional(),
  pacing: z
    .boolean()
    .meta({
      description:
        'Whether its calls follow the origin’s pacing (its pace gate, the concurrency it learnt, and what its answers teach it). Default true.',
    })
    .optional(),
});

export type DestinationSpecInput = z.input<typeof destinationSpecSchema>;
/**
 * A destination's spec as kept and shown: its secret headers by name only (`secretHeaderNames`);
 * their values are sealed apart (store.ts) and opened only by the executor.
 */
export type DestinationSpec = Omit<z.output<typeof destinationSpecSchema>, 'secretHeaders'> & {
  secretHeaderNames?: string[];
};

/** The base URL without a trailing `/` (a relative URI brings its own), its origin's case folded. */
export function normalizeBaseUrl(text: string): string {
  const url = new URL(text);
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.protocol}//${url.host.toLowerCase()}${path}`;
}

/**
 * A spec as an operator gives it (JSON), validated, its secret header values apart; a
 * ValidationError naming each bad field.
 */
export function parseDestinationInput(input: unknown): {
  spec: DestinationSpec;
  secretHeaders: Record<string, string> | undefined;
} {
  const { secretHeaders, ...spec } = parseWith(destinationSpecSchema, input);
  const names = new Set(Object.keys(spec.headers ?? {}).map((n) => n.toLowerCase()));
  const both = Object.keys(secretHeaders ?? {}).filter((n) => names.has(n.toLowerCase()));
  if (both.length > 0)
    throw new ValidationError([
      { path: 'secretHeaders', message: `${both.join(', ')}: a header is either plain or secret, not both` },
    ]);
  return { spec, secretHeaders };
}

/** A spec without secret headers (what resolution tests and the ingress need). */
export function parseDestinationSpec(input: unknown): DestinationSpec {
  return parseDestinationInput(input).spec;
}

/** The origin (`scheme://host:port`) a destination's calls go to: what its credential must be bound to. */
export function destinationOrigin(spec: Pick<DestinationSpec, 'baseUrl'>): string {
  return credentialOriginOf(new URL(spec.baseUrl));
}

export function checkDestinationName(name: string): string {
  if (!DESTINATION_NAME_PATTERN.test(name))
    throw new ValidationError([
      {
        path: 'name',
        message: "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
      },
    ]);
  return name;
}
