import { z } from 'zod';

/**
 * Outgoing HTTP header maps. Names are RFC 9110 tokens, values are field-values (no CR/LF/NUL or
 * other controls, nothing a Latin-1 byte string cannot carry), and the map is bounded: a header
 * set the HTTP client would reject later must be refused here, at the door, with a 400.
 */

export const HEADER_NAME_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";
export const HEADER_VALUE_PATTERN = '^[\\t\\x20-\\x7e\\x80-\\xff]*$';
export const MAX_HEADER_NAME_LENGTH = 256;

const HEADER_NAME = new RegExp(HEADER_NAME_PATTERN);
const HEADER_VALUE = new RegExp(HEADER_VALUE_PATTERN);

/**
 * Headers the HTTP client owns: hop-by-hop ones (RFC 9110 §7.6.1) and the computed body length.
 * undici refuses or overrides them, so accepting them would only fail or mislead later.
 */
export const CLIENT_MANAGED_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'content-length',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

export interface HeaderLimits {
  maxHeaderCount: number;
  /** Sum of the lengths of every name and value. */
  maxHeadersBytes: number;
}

function headerNameProblem(name: string): string | undefined {
  if (name.length > MAX_HEADER_NAME_LENGTH)
    return `header name longer than ${MAX_HEADER_NAME_LENGTH} characters`;
  if (!HEADER_NAME.test(name))
    return "invalid header name: must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~)";
  if (CLIENT_MANAGED_HEADERS.has(name.toLowerCase()))
    return 'header is set by the HTTP client and may not be given';
  return undefined;
}

function headerValueProblem(value: string): string | undefined {
  if (HEADER_VALUE.test(value)) return undefined;
  return 'invalid header value: control characters (CR, LF, NUL...) and characters above U+00FF are not allowed';
}

function checkHeaders(headers: Record<string, string>, limits: HeaderLimits, ctx: z.RefinementCtx): void {
  const names = Object.keys(headers);
  if (names.length > limits.maxHeaderCount) {
    ctx.addIssue({
      code: 'custom',
      message: `too many headers: ${names.length} (at most ${limits.maxHeaderCount})`,
    });
  }
  const seen = new Map<string, string>();
  let bytes = 0;
  for (const [name, value] of Object.entries(headers)) {
    bytes += name.length + value.length;
    const problem = headerNameProblem(name) ?? headerValueProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', path: [name], message: problem });
    const first = seen.get(name.toLowerCase());
    if (first !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: [name],
        message: `duplicates header "${first}" (names are case-insensitive)`,
      });
    }
    seen.set(name.toLowerCase(), first ?? name);
  }
  if (bytes > limits.maxHeadersBytes) {
    ctx.addIssue({
      code: 'custom',
      message: `headers total ${bytes} bytes, over the limit of ${limits.maxHeadersBytes}`,
    });
  }
}

export function outgoingHeaders(limits: HeaderLimits, description: string) {
  return z
    .record(z.string(), z.string())
    .superRefine((headers, ctx) => checkHeaders(headers, limits, ctx))
    .meta({
      description: `${description} At most ${limits.maxHeaderCount} headers and ${limits.maxHeadersBytes} bytes in total; names are case-insensitive and must be unique; ${[...CLIENT_MANAGED_HEADERS].join(', ')} are set by the HTTP client and refused.`,
      maxProperties: limits.maxHeaderCount,
      propertyNames: { type: 'string', pattern: HEADER_NAME_PATTERN, maxLength: MAX_HEADER_NAME_LENGTH },
      additionalProperties: { type: 'string', pattern: HEADER_VALUE_PATTERN },
    });
}
