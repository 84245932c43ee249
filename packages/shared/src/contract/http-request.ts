/**
 * `request` of the request envelope: the HTTP call to make (URI, method, body, headers).
 *
 * @module
 */

import { z } from 'zod';
import { strictObject } from './fields.ts';
import { outgoingHeaders } from './headers.ts';
import { type ContractLimits, MAX_METHOD_LENGTH } from './limits.ts';

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

export function httpRequestSchema(limits: ContractLimits) {
  return strictObject({
    uri: uriField(limits),
    method: methodField(),
    body: bodyField(limits).optional(),
    headers: outgoingHeaders(limits, 'Request headers, name → value.').optional(),
  }).meta({ title: 'HttpRequest', description: 'The HTTP call to make on the caller’s behalf.' });
}
