import { z } from 'zod';
import { tryParseDuration, UNSIGNED_GO_DURATION_PATTERN } from '../time/duration.ts';
import { RFC3339_PATTERN, tryParseRfc3339 } from '../time/rfc3339.ts';
import { unknownKeysMessage } from './issues.ts';

/**
 * Field schemas shared by the request and result envelopes. Each one carries its own error
 * messages (naming the rule that failed) and the JSON Schema keywords producers in other
 * languages need (`pattern`, `maxLength`, ...), so the published schema and the validator agree.
 */

/** Longest accepted duration text; Go has no limit, but no sane duration needs more. */
export const MAX_DURATION_TEXT_LENGTH = 64;
/** Longest accepted traceparent (version 00 is 55 characters; later versions may append fields). */
export const MAX_TRACEPARENT_LENGTH = 512;

/** A strict object: unknown keys are refused with a message naming them and the allowed ones. */
export function strictObject<Shape extends z.core.$ZodLooseShape>(shape: Shape) {
  const allowed = Object.keys(shape);
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === 'unrecognized_keys' ? unknownKeysMessage(issue.keys, allowed) : undefined,
  });
}

/** Visible ASCII only: these ids become Kafka keys, Redis keys, URL segments and log fields. */
const PRINTABLE_ASCII = /^[\x21-\x7e]+$/;

export function printableId(maxLength: number, description: string) {
  return z
    .string()
    .min(1, { abort: true })
    .max(maxLength, { abort: true })
    .regex(PRINTABLE_ASCII, { error: 'must be printable ASCII without spaces (0x21-0x7E)' })
    .meta({ description });
}

/**
 * What a duration field accepts beyond the Go grammar. `at-least-1ms`: the field becomes whole
 * milliseconds downstream (a limiter window), where anything shorter truncates to nothing.
 */
export type DurationRule = 'positive' | 'non-negative' | 'at-least-1ms';

const DURATION_RULES: Readonly<Record<DurationRule, { minNs: bigint; text: string }>> = {
  'non-negative': { minNs: 0n, text: '0 or more' },
  positive: { minNs: 1n, text: 'greater than 0' },
  'at-least-1ms': { minNs: 1_000_000n, text: 'at least 1ms' },
};

const UNSIGNED_GO_DURATION = new RegExp(UNSIGNED_GO_DURATION_PATTERN, 'u');

/** Why a duration failed the unsigned grammar: Go's own reason, or the sign. */
function durationSyntaxMessage(text: string): string {
  const parsed = tryParseDuration(text);
  if (!parsed.ok) return parsed.message;
  return `Go duration ${JSON.stringify(text)} must not ${parsed.ns < 0n ? 'be negative' : 'carry a minus sign'}`;
}

/** A Go duration string (`300ms`, `1.5h`, `2h45m`), kept as text on the wire. */
export function goDuration(rule: DurationRule, description: string) {
  const { minNs, text: range } = DURATION_RULES[rule];
  return z
    .string()
    .max(MAX_DURATION_TEXT_LENGTH, { abort: true })
    .regex(UNSIGNED_GO_DURATION, {
      abort: true,
      error: (issue) => durationSyntaxMessage(String(issue.input)),
    })
    .superRefine((text, ctx) => {
      const parsed = tryParseDuration(text); // the grammar passed; only int64 overflow is left
      if (!parsed.ok) return ctx.addIssue({ code: 'custom', message: parsed.message });
      if (parsed.ns < minNs) {
        ctx.addIssue({ code: 'custom', message: `Go duration ${JSON.stringify(text)} must be ${range}` });
      }
    })
    .meta({
      description: `${description} A Go time.ParseDuration string (units ns, us, ms, s, m, h; e.g. 300ms, 1.5h, 2h45m), ${range}.`,
      examples: ['300ms', '1.5h', '2h45m'],
    });
}

/**
 * The instants the service holds: the queue counts due times in ms from the Unix epoch (nothing
 * before it), and the last one is the last instant RFC 3339 writes in UTC (a later one, e.g.
 * `9999-12-31T23:00:00-02:00`, could not be written back as RFC 3339 by `formatRfc3339`).
 */
export const MIN_INSTANT = '1970-01-01T00:00:00Z';
export const MAX_INSTANT = '9999-12-31T23:59:59.999Z';
export const MIN_INSTANT_MS = 0;
export const MAX_INSTANT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** An RFC 3339 date-time with a mandatory offset (`Z` or `±hh:mm`), within MIN/MAX_INSTANT. */
export function rfc3339(description: string) {
  return z
    .string()
    .max(64, { abort: true })
    .superRefine((text, ctx) => {
      const parsed = tryParseRfc3339(text);
      if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.message });
      else if (parsed.epochMs < MIN_INSTANT_MS || parsed.epochMs > MAX_INSTANT_MS) {
        ctx.addIssue({
          code: 'custom',
          message: `${JSON.stringify(text)} is outside the instants the service can hold (${MIN_INSTANT} to ${MAX_INSTANT})`,
        });
      }
    })
    .meta({
      description: `${description} RFC 3339 date-time with offset, e.g. 2026-12-01T09:00:00Z, from ${MIN_INSTANT} to ${MAX_INSTANT}.`,
      format: 'date-time',
      pattern: RFC3339_PATTERN,
      maxLength: 64,
    });
}

const TRACEPARENT_SYNTAX = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?$/;
export const TRACEPARENT_PATTERN = TRACEPARENT_SYNTAX.source;

/** Why a W3C Trace Context `traceparent` is invalid, or undefined when it is valid. */
export function traceparentProblem(text: string): string | undefined {
  const match = TRACEPARENT_SYNTAX.exec(text);
  if (!match)
    return 'expected version-traceid-parentid-flags in lower-case hex, e.g. 00-<32 hex>-<16 hex>-01';
  const [, version, traceId, parentId, extra] = match;
  if (version === 'ff') return 'version ff is forbidden';
  if (version === '00' && extra !== undefined) return 'version 00 has exactly four fields';
  if (/^0+$/.test(traceId ?? '')) return 'trace-id must not be all zeros';
  if (/^0+$/.test(parentId ?? '')) return 'parent-id must not be all zeros';
  return undefined;
}

export function traceparent(description: string) {
  return z
    .string()
    .max(MAX_TRACEPARENT_LENGTH, { abort: true })
    .superRefine((text, ctx) => {
      const problem = traceparentProblem(text);
      if (problem) ctx.addIssue({ code: 'custom', message: `invalid W3C traceparent: ${problem}` });
    })
    .meta({ description, pattern: TRACEPARENT_PATTERN, maxLength: MAX_TRACEPARENT_LENGTH });
}

/**
 * Deepest nesting of objects and arrays in a JSON field. Serializers and parsers recurse (JSON.stringify
 * overflows the stack near 5k levels here; Python's json near 1k), so depth is checked first, without
 * recursion, and refused with a message saying so.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether objects/arrays nest deeper than `maxDepth` (iterative; a cycle counts as too deep). */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  const stack: Array<{ node: unknown; depth: number }> = [{ node: value, depth: 0 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const { node, depth } = top;
    if (typeof node !== 'object' || node === null) continue;
    if (depth >= maxDepth) return true;
    for (const child of Object.values(node)) stack.push({ node: child, depth: depth + 1 });
  }
  return false;
}

/**
 * The first number in a JSON value that a double does not carry exactly as written, if any: one
 * that overflowed to ±Infinity (`1e999`, which JSON.stringify would write as `null`), or one beyond
 * ±(2^53−1), where integers lose digits (`123456789012345678901234567890`). Walked without recursion.
 */
export function inexactNumber(value: unknown): number | undefined {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node === 'number') {
      if (!Number.isFinite(node) || Math.abs(node) > Number.MAX_SAFE_INTEGER) return node;
    } else if (typeof node === 'object' && node !== null)
      for (const child of Object.values(node)) stack.push(child);
  }
  return undefined;
}

/**
 * Any JSON value, refused when nested deeper than MAX_JSON_DEPTH, when its serialized UTF-8 size
 * exceeds `maxBytes`, or when it holds a number that would not come back as written (inexactNumber):
 * a clear 400 rather than an echo that silently differs.
 */
export function boundedJson(maxBytes: number, description: string) {
  return z
    .unknown()
    .superRefine((value, ctx) => {
      if (nestsDeeperThan(value, MAX_JSON_DEPTH)) {
        return ctx.addIssue({
          code: 'custom',
          message: `nests objects/arrays deeper than the limit of ${MAX_JSON_DEPTH} levels`,
        });
      }
      const size = serializedSize(value);
      if (size === undefined) ctx.addIssue({ code: 'custom', message: 'must be a JSON value' });
      else if (size > maxBytes) {
        ctx.addIssue({
          code: 'custom',
          message: `is ${size} bytes as JSON, over the limit of ${maxBytes} bytes`,
        });
      } else {
        const inexact = inexactNumber(value);
        if (inexact !== undefined)
          ctx.addIssue({
            code: 'custom',
            message: `holds a number that would not come back as written (${inexact}): numbers must be finite and within ±${Number.MAX_SAFE_INTEGER}; send larger ones as strings`,
          });
      }
    })
    .meta({
      description: `${description} At most ${maxBytes} bytes once serialized as JSON, and at most ${MAX_JSON_DEPTH} levels of nested objects/arrays; numbers finite and within ±${Number.MAX_SAFE_INTEGER} (2^53−1: a double holds every integer up to it), larger ones sent as strings.`,
    });
}

function serializedSize(value: unknown): number | undefined {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? undefined : Buffer.byteLength(text, 'utf8');
  } catch {
    return undefined; // cycles, bigints: not JSON
  }
}
