import { z } from 'zod';
import { ValidationError } from '../errors/index.ts';
import { toMs, tryParseDuration, UNSIGNED_GO_DURATION_PATTERN } from '../time/duration.ts';
import { formatRfc3339, RFC3339_PATTERN, tryParseRfc3339 } from '../time/rfc3339.ts';
import { MAX_DURATION_TEXT_LENGTH, MAX_INSTANT, MAX_INSTANT_MS, MIN_INSTANT_MS } from './fields.ts';
import type { FieldIssue } from './issues.ts';

/**
 * `meta.deadline`, the start-by deadline (docs/architecture.md §4): an RFC 3339 instant, or a Go
 * duration counted from acceptance. The door that accepts a request (the ingress for HTTP, the
 * router for a record written straight to `in`) resolves it to an instant once and writes that
 * instant into the copy that travels on, so a request that goes through the outbox and back keeps
 * the deadline it was given instead of counting its duration again.
 */

/** An RFC 3339 instant starts with its year; a Go duration never does. */
const INSTANT_START = /^[0-9]{4}-/;

/** Whether `meta.deadline` is already an instant (else a duration from acceptance). */
export function isDeadlineInstant(text: string): boolean {
  return INSTANT_START.test(text);
}

/** Why the text is no deadline (syntax and range only: the clock is the door's business). */
function deadlineSyntaxProblem(text: string): string | undefined {
  if (isDeadlineInstant(text)) {
    const parsed = tryParseRfc3339(text);
    if (!parsed.ok) return parsed.message;
    if (parsed.epochMs < MIN_INSTANT_MS || parsed.epochMs > MAX_INSTANT_MS)
      return `${JSON.stringify(text)} is outside the instants the service can hold (up to ${MAX_INSTANT})`;
    return undefined;
  }
  const parsed = tryParseDuration(text);
  if (!parsed.ok)
    return `must be an RFC 3339 instant with offset (2026-12-01T09:00:00Z) or a Go duration from acceptance (30s, 1h): ${parsed.message}`;
  if (parsed.ns < 1_000_000n) return `duration ${JSON.stringify(text)} must be at least 1ms`;
  return undefined;
}

export function deadlineField() {
  return z
    .string()
    .max(MAX_DURATION_TEXT_LENGTH, { abort: true })
    .superRefine((text, ctx) => {
      const problem = deadlineSyntaxProblem(text);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .meta({
      description:
        'Start-by deadline: a task not started by then ends with one result, `meta.error.code` expired, and no attempt (a retry whose pause would end after it ends the same way). An RFC 3339 instant with offset (2026-12-01T09:00:00Z), or a Go duration counted from acceptance (30s, 1h30m; at least 1ms): the service writes the instant it resolves to into the copy it passes on. Refused when it is already past at acceptance, or earlier than `scheduled`.',
      pattern: `(${RFC3339_PATTERN})|(${UNSIGNED_GO_DURATION_PATTERN})`,
      maxLength: MAX_DURATION_TEXT_LENGTH,
      examples: ['30s', '2026-12-01T09:05:00Z'],
    });
}

/** The deadline as epoch ms, `acceptedAtMs` anchoring a duration; undefined when there is none or it is unreadable. */
export function deadlineAt(deadline: string | undefined, acceptedAtMs: number): number | undefined {
  if (deadline === undefined) return undefined;
  if (isDeadlineInstant(deadline)) {
    const parsed = tryParseRfc3339(deadline);
    return parsed.ok ? parsed.epochMs : undefined;
  }
  const parsed = tryParseDuration(deadline);
  return parsed.ok ? acceptedAtMs + toMs(parsed.ns) : undefined;
}

export type DeadlineResolution = { ok: true; at: number | undefined } | { ok: false; error: ValidationError };

/**
 * The door's check of a request's deadline at its acceptance (`acceptedAtMs`): resolved to an
 * instant, refused when it is not after acceptance (it could never be met) or when `scheduled`
 * lies after it (the task could never start in time). Only at the door: a copy checked again
 * later (the executor, a relayed record) has a deadline that may have passed meanwhile, which
 * makes it expired, not invalid.
 */
export function resolveDeadline(
  meta: { deadline?: string | undefined; scheduled?: string | undefined },
  acceptedAtMs: number,
): DeadlineResolution {
  const at = deadlineAt(meta.deadline, acceptedAtMs);
  if (at === undefined) return { ok: true, at: undefined };
  const issues: FieldIssue[] = [];
  if (at <= acceptedAtMs)
    issues.push({
      path: 'meta.deadline',
      message: `is in the past: ${formatRfc3339(at)} is not after the request's acceptance at ${formatRfc3339(acceptedAtMs)}`,
    });
  const scheduled = meta.scheduled === undefined ? undefined : tryParseRfc3339(meta.scheduled);
  if (scheduled?.ok && scheduled.epochMs > at)
    issues.push({
      path: 'meta.scheduled',
      message: `${meta.scheduled} is after meta.deadline (${formatRfc3339(at)}): the task could never start in time`,
    });
  if (issues.length === 0) return { ok: true, at };
  return { ok: false, error: new ValidationError(issues) };
}

/**
 * The envelope with `meta.deadline` written as the instant `at` (the copy passed on after the
 * door resolved it); the envelope itself when it has no deadline or holds that instant already.
 */
export function withDeadlineInstant<T extends { meta: { deadline?: string | undefined } }>(
  envelope: T,
  at: number | undefined,
): T {
  if (at === undefined || envelope.meta.deadline === undefined) return envelope;
  if (isDeadlineInstant(envelope.meta.deadline)) return envelope;
  return { ...envelope, meta: { ...envelope.meta, deadline: formatRfc3339(at) } };
}

/** Why `text` cannot be an operator's default deadline (a Go duration of at least 1ms), if it cannot. */
export function defaultDeadlineProblem(text: string): string | undefined {
  if (isDeadlineInstant(text)) return 'must be a Go duration (30s, 1h): a default counts from each request';
  const parsed = tryParseDuration(text);
  if (!parsed.ok) return `must be a Go duration (30s, 1h): ${parsed.message}`;
  if (parsed.ns < 1_000_000n) return `duration ${JSON.stringify(text)} must be at least 1ms`;
  if (toMs(parsed.ns) > MAX_INSTANT_MS)
    return `duration ${JSON.stringify(text)} is beyond any instant the service can hold`;
  return undefined;
}

/**
 * The start-by deadline the operator's defaults give a request without `meta.deadline` (its API
 * key's, its destination's): each a duration counted from when the task is first due, its
 * `scheduled` instant or else its acceptance, so that a default never refuses a request scheduled
 * ahead; the earliest of them binds. Undefined when the request has its own or no default applies.
 */
export function defaultDeadlineAt(
  defaults: ReadonlyArray<string | undefined>,
  meta: { deadline?: string | undefined; scheduled?: string | undefined },
  acceptedAtMs: number,
): number | undefined {
  if (meta.deadline !== undefined) return undefined;
  const scheduled = meta.scheduled === undefined ? undefined : tryParseRfc3339(meta.scheduled);
  const dueAtMs = Math.max(acceptedAtMs, scheduled?.ok ? scheduled.epochMs : acceptedAtMs);
  const instants = defaults.flatMap((text) => {
    if (text === undefined || defaultDeadlineProblem(text) !== undefined) return [];
    const at = deadlineAt(text, dueAtMs);
    return at === undefined ? [] : [Math.min(at, MAX_INSTANT_MS)];
  });
  return instants.length === 0 ? undefined : Math.min(...instants);
}

/** The envelope with a default deadline `at` written as its `meta.deadline` (unchanged without one). */
export function withDefaultDeadline<T extends { meta: { deadline?: string | undefined } }>(
  envelope: T,
  at: number | undefined,
): T {
  if (at === undefined || envelope.meta.deadline !== undefined) return envelope;
  return { ...envelope, meta: { ...envelope.meta, deadline: formatRfc3339(at) } };
}
