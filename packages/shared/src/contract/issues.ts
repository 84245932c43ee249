import type { z } from 'zod';
import { ValidationError } from '../errors/index.ts';

/**
 * Turns zod's issues into the `{ path, message }` pairs of ValidationError. Paths are dotted
 * (`meta.limiter.rates.0.duration`) because the same text reaches HTTP callers, Kafka producers
 * (in `meta.error` on `out`) and logs, where a plain string reads best.
 */

export interface FieldIssue {
  path: string;
  message: string;
}

export type SafeParse<T> = { ok: true; value: T } | { ok: false; error: ValidationError };

export function dottedPath(path: ReadonlyArray<PropertyKey>): string {
  return path.map(String).join('.');
}

/** A short, safe rendering of a received value for messages (never the whole body). */
function describeReceived(input: unknown): string {
  if (input === null) return 'null';
  if (Array.isArray(input)) return 'an array';
  if (typeof input === 'string') {
    return input.length > 40
      ? `string ${JSON.stringify(`${input.slice(0, 40)}…`)}`
      : `string ${JSON.stringify(input)}`;
  }
  if (typeof input === 'number' || typeof input === 'boolean') return String(input);
  return typeof input === 'object' ? 'an object' : typeof input;
}

/** "must be at most 256 characters long", "must have at least 1 item", "must be >= 1 (received 0)". */
function boundText(bound: {
  origin: string;
  lower: boolean;
  limit: unknown;
  inclusive?: boolean;
  input: unknown;
}): string {
  const { origin, lower, limit, inclusive, input } = bound;
  const relation = lower ? 'at least' : 'at most';
  if (origin === 'string')
    return lower && limit === 1 ? 'must not be empty' : `must be ${relation} ${limit} characters long`;
  if (origin === 'array') return `must have ${relation} ${limit} item${limit === 1 ? '' : 's'}`;
  const comparison = `${lower ? '>' : '<'}${inclusive ? '=' : ''}`;
  return `must be ${comparison} ${limit} (received ${describeReceived(input)})`;
}

function boundMessage(issue: z.core.$ZodRawIssue<z.core.$ZodIssueTooBig | z.core.$ZodIssueTooSmall>): string {
  const { origin, inclusive, input } = issue;
  return issue.code === 'too_small'
    ? boundText({ origin, lower: true, limit: issue.minimum, inclusive, input })
    : boundText({ origin, lower: false, limit: issue.maximum, inclusive, input });
}

/**
 * The per-parse error map: plainer words than zod's defaults for the issues every field shares.
 * Field-specific messages (durations, headers, URIs...) are set where those fields are defined.
 */
export const contractErrorMap: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'required';
      return `expected ${issue.expected === 'int' ? 'an integer' : issue.expected}, received ${describeReceived(issue.input)}`;
    case 'invalid_value': {
      const options = issue.values.map((v) => JSON.stringify(v)).join(', ');
      if (issue.input === undefined) return `required (one of ${options})`;
      return `expected one of ${options}, received ${describeReceived(issue.input)}`;
    }
    case 'too_big':
    case 'too_small':
      return boundMessage(issue);
    default:
      return undefined;
  }
};

/** The message a strict object gives for keys it does not know, listing the ones it does. */
export function unknownKeysMessage(unknown: readonly string[], allowed: readonly string[]): string {
  const names = unknown.map((k) => JSON.stringify(k)).join(', ');
  const noun = unknown.length === 1 ? 'key' : 'keys';
  return `unknown ${noun} ${names} (allowed: ${allowed.join(', ')})`;
}

export function toFieldIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({ path: dottedPath(issue.path), message: issue.message }));
}

/** Runs a schema with the contract's messages and returns a discriminated union, never throwing. */
export function safeParseWith<S extends z.ZodType>(schema: S, input: unknown): SafeParse<z.output<S>> {
  const result = schema.safeParse(input, { error: contractErrorMap });
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, error: new ValidationError(toFieldIssues(result.error)) };
}

/** Runs a schema with the contract's messages; throws a ValidationError naming every bad field. */
export function parseWith<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = safeParseWith(schema, input);
  if (!result.ok) throw result.error;
  return result.value;
}
