import { webCrypto } from '../ids.ts';

/**
 * Verification of what Requester signs (`meta.signing.keyId`), for targets written in TypeScript:
 * Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>` over
 * `id.timestamp.body`) and `X-Signature` (hex HMAC-SHA256 of the body). Secrets are given in the
 * text Requester keeps them in (`whsec_…`, `hex:…`, `base64:…`, `text:…`); several may be given
 * during a rotation, and any one that verifies is enough. Web Crypto only: Node ≥ 18, Deno, Bun,
 * workers.
 */

/** The signature is missing, malformed, made with another secret, or (Standard Webhooks) too old or too new. */
export class SignatureError extends Error {
  override name = 'SignatureError';
}

/** Header lookups over a fetch `Headers`, a Node `IncomingHttpHeaders`, or a plain record. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

/** The body exactly as received: verify before parsing (a re-serialised JSON is another body). */
export type Body = string | Uint8Array | ArrayBuffer;

export interface VerifyOptions {
  /** The secret(s), as Requester keeps them: `whsec_<base64>`, `hex:…`, `base64:…` or `text:…`. */
  secrets: string | readonly string[];
  headers: HeaderSource;
  body: Body;
}

export interface WebhookOptions extends VerifyOptions {
  /** How far `webhook-timestamp` may be from now, either way (replays are refused). Default 300 s. */
  toleranceSeconds?: number;
  /** The current time, ms (tests). */
  now?: number;
}

/** What a verified Standard Webhooks request says of itself. */
export interface VerifiedWebhook {
  /** `webhook-id`: the same on every attempt of one request (deduplicate by it). */
  id: string;
  /** `webhook-timestamp`, seconds since the epoch: when this attempt was signed. */
  timestamp: number;
}

/** Verifies a Standard Webhooks signature; throws SignatureError when it does not hold. */
export async function verifyWebhook(options: WebhookOptions): Promise<VerifiedWebhook> {
  const id = header(options.headers, 'webhook-id');
  const timestampText = header(options.headers, 'webhook-timestamp');
  const signatures = header(options.headers, 'webhook-signature');
  if (!id || !timestampText || !signatures)
    throw new SignatureError('webhook-id, webhook-timestamp and webhook-signature are required');
  if (!/^\d{1,15}$/.test(timestampText))
    throw new SignatureError('webhook-timestamp is not a number of seconds');
  const timestamp = Number(timestampText);
  const tolerance = options.toleranceSeconds ?? 300;
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(now - timestamp) > tolerance)
    throw new SignatureError(`webhook-timestamp is more than ${tolerance} s away from now`);
  const signed = concat(utf8(`${id}.${timestampText}.`), bytesOf(options.body));
  const given = signatures
    .split(' ')
    .filter((part) => part.startsWith('v1,'))
    .map((part) => part.slice(3));
  for (const secret of list(options.secrets)) {
    const expected = base64(await hmac(secretBytes(secret, 'whsec'), signed));
    if (given.some((candidate) => same(candidate, expected))) return { id, timestamp };
  }
  throw new SignatureError('no webhook-signature matches the secret(s)');
}

/** Verifies an `X-Signature` (hex HMAC-SHA256 of the body); throws SignatureError when it does not hold. */
export async function verifySignature(options: VerifyOptions): Promise<void> {
  const given = (header(options.headers, 'x-signature') ?? '')
    .split(',')
    .map((part) => part.trim().toLowerCase())
    .filter(Boolean);
  if (given.length === 0) throw new SignatureError('x-signature is required');
  const body = bytesOf(options.body);
  for (const secret of list(options.secrets)) {
    const expected = hex(await hmac(secretBytes(secret, 'x-signature'), body));
    if (given.some((candidate) => same(candidate, expected))) return;
  }
  throw new SignatureError('no x-signature matches the secret(s)');
}

/**
 * Verifies a fetch `Request` (Hono's `c.req.raw`, Deno, Bun, workers) by whichever scheme its
 * headers carry, and returns its body as text. The request's body is read: pass a clone if it is
 * read again.
 */
export async function verifyRequest(
  request: Request,
  options: { secrets: string | readonly string[]; toleranceSeconds?: number },
): Promise<string> {
  const body = new Uint8Array(await request.arrayBuffer());
  const verify = { ...options, headers: request.headers, body };
  if (request.headers.has('webhook-signature')) await verifyWebhook(verify);
  else await verifySignature(verify);
  return new TextDecoder().decode(body);
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value.join(name === 'x-signature' ? ',' : ' ') : value;
}

function list(secrets: string | readonly string[]): readonly string[] {
  return typeof secrets === 'string' ? [secrets] : secrets;
}

/** A secret's bytes, in the text format of Requester's signing credentials. */
function secretBytes(text: string, scheme: 'whsec' | 'x-signature'): Uint8Array {
  const secret = text.trim();
  if (secret.startsWith('whsec_')) {
    if (scheme !== 'whsec')
      throw new SignatureError('a whsec_ secret signs Standard Webhooks, not X-Signature');
    return fromBase64(secret.slice(6));
  }
  if (scheme === 'whsec') throw new SignatureError('a Standard Webhooks secret starts with whsec_');
  if (secret.startsWith('hex:')) {
    const digits = secret.slice(4);
    if (!/^([0-9a-fA-F]{2})+$/.test(digits)) throw new SignatureError('the hex: secret is not hex');
    return Uint8Array.from(digits.match(/../g) ?? [], (pair) => Number.parseInt(pair, 16));
  }
  if (secret.startsWith('base64:')) return fromBase64(secret.slice(7));
  if (secret.startsWith('text:')) return utf8(text.trimStart().slice(5));
  throw new SignatureError('a secret starts with whsec_, hex:, base64: or text:');
}

async function hmac(secret: Uint8Array, data: Uint8Array): Promise<Uint8Array> {
  // Copies typed as ArrayBuffer-backed, as Web Crypto's BufferSource wants them.
  const key = await webCrypto.subtle.importKey(
    'raw',
    new Uint8Array(secret),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  return new Uint8Array(await webCrypto.subtle.sign('HMAC', key, new Uint8Array(data)));
}

/** Compares in time independent of where the strings differ. */
function same(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function bytesOf(body: Body): Uint8Array {
  if (typeof body === 'string') return utf8(body);
  return body instanceof Uint8Array ? body : new Uint8Array(body);
}

function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function base64(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  try {
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  } catch {
    throw new SignatureError('the secret is not base64');
  }
}
