import { createHmac } from 'node:crypto';
import type { SecretText } from '@requester/shared/config';
import { ConfigError, RequesterError } from '@requester/shared/errors';
import type { HttpCall } from '../http/index.ts';
import { idempotencyKey } from '../http/request.ts';

/**
 * Request signing (docs/architecture.md §5 outbound hygiene), opt-in per request by `meta.signing.keyId`.
 * Secrets live only in server config (SIGNING_KEYS) and only ever leave the process as HMACs.
 *
 * SIGNING_KEYS: `;`-separated entries `<keyId>=<secret>` (whitespace around entries ignored):
 *   whsec_<base64>      Standard Webhooks: `webhook-id`, `webhook-timestamp` and
 *                       `webhook-signature: v1,<base64 HMAC-SHA256("id.timestamp.body")>`, keyed
 *                       with the base64-decoded bytes (the usual `whsec_` secret format).
 *   hex:<hex> | base64:<base64> | text:<utf-8>
 *                       plain: `x-signature: <hex HMAC-SHA256(body)>`, keyed with those bytes. No
 *                       timestamp: the body alone is signed, as receivers of this scheme expect, so
 *                       it does not protect against replays (prefer Standard Webhooks).
 * A key id listed several times signs with every secret, in the listed order (key rotation: the
 * receiver accepts any one): space-separated `v1,…` entries, or comma-separated `x-signature`
 * values. All secrets of one id use one scheme. Each secret has at least 16 bytes.
 */

export type SigningScheme = 'standard-webhooks' | 'hmac-sha256';

export interface SigningKey {
  scheme: SigningScheme;
  secrets: Buffer[];
}

/** Key id format: printable ASCII without `;` and `=` (the list's separators), as long as the contract allows. */
const KEY_ID = /^[\x21-\x3a\x3c\x3e-\x7e]{1,128}$/;
const MIN_SECRET_BYTES = 16;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const HEX = /^(?:[0-9a-fA-F]{2})+$/;

/** The signer's access to the secrets; nothing else in or out of this module has one. */
let keysOf: (keys: SigningKeys) => ReadonlyMap<string, SigningKey>;

/**
 * Parsed SIGNING_KEYS (make one with parseSigningKeys). Logs and serializes as its key ids only:
 * the secrets sit in a private field and leave the process only as HMACs.
 */
export class SigningKeys {
  readonly #keys: ReadonlyMap<string, SigningKey>;
  /** The configured key ids (not secret). A plain field: loggers may copy the object, private fields do not follow. */
  readonly ids: readonly string[];

  static {
    keysOf = (keys) => keys.#keys;
  }

  constructor(keys: ReadonlyMap<string, SigningKey>) {
    this.#keys = new Map(keys);
    this.ids = Object.freeze([...keys.keys()]);
  }

  scheme(keyId: string): SigningScheme | undefined {
    return this.#keys.get(keyId)?.scheme;
  }

  toJSON(): { keyIds: readonly string[] } {
    return { keyIds: this.ids };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `SigningKeys(${this.ids.join(', ')})`;
  }
}

/**
 * Parses SIGNING_KEYS. A bad entry fails with a ConfigError naming the variable, the entry's
 * position and its key id, and what is wrong, never the secret itself.
 */
export function parseSigningKeys(text: string, variable = 'SIGNING_KEYS'): SigningKeys {
  const keys = new Map<string, SigningKey>();
  const entries = text.split(';').map((entry) => entry.trim());
  entries.forEach((entry, i) => {
    if (entry === '') return;
    const where = `${variable}: entry ${i + 1}`;
    const eq = entry.indexOf('=');
    if (eq < 0) throw new ConfigError(`${where} is not <keyId>=<secret>`, { variable, entry: i + 1 });
    const keyId = entry.slice(0, eq).trim();
    if (!KEY_ID.test(keyId))
      throw new ConfigError(
        `${where}: the key id is not 1-128 printable ASCII characters without ";" and "="`,
        {
          variable,
          entry: i + 1,
        },
      );
    const at = `${where} (key id ${JSON.stringify(keyId)})`;
    const { scheme, secret } = decodeSecret(entry.slice(eq + 1).trim(), at, variable);
    const key = keys.get(keyId) ?? { scheme, secrets: [] };
    if (key.scheme !== scheme)
      throw new ConfigError(
        `${at}: a key id signs with one scheme; this secret is ${scheme}, an earlier one ${key.scheme}`,
        {
          variable,
          keyId,
        },
      );
    key.secrets.push(secret);
    keys.set(keyId, key);
  });
  return new SigningKeys(keys);
}

/** The configured keys (SIGNING_KEYS, kept redacted in the config until here). */
export function signingKeysFromConfig(config: { signingKeys: SecretText }): SigningKeys {
  return parseSigningKeys(config.signingKeys.reveal());
}

function decodeSecret(text: string, at: string, variable: string): { scheme: SigningScheme; secret: Buffer } {
  const fail = (problem: string) => new ConfigError(`${at}: ${problem}`, { variable });
  let scheme: SigningScheme = 'hmac-sha256';
  let bytes: Buffer;
  if (text.startsWith('whsec_')) {
    scheme = 'standard-webhooks';
    bytes = base64Bytes(text.slice(6), () => fail('the whsec_ secret is not base64'));
  } else if (text.startsWith('hex:')) {
    if (!HEX.test(text.slice(4))) throw fail('the hex: secret is not an even number of hex digits');
    bytes = Buffer.from(text.slice(4), 'hex');
  } else if (text.startsWith('base64:')) {
    bytes = base64Bytes(text.slice(7), () => fail('the base64: secret is not base64'));
  } else if (text.startsWith('text:')) {
    bytes = Buffer.from(text.slice(5), 'utf8');
  } else {
    throw fail('the secret must start with whsec_, hex:, base64: or text:');
  }
  if (bytes.length < MIN_SECRET_BYTES)
    throw fail(`the secret has ${bytes.length} bytes; at least ${MIN_SECRET_BYTES} are needed`);
  return { scheme, secret: bytes };
}

function base64Bytes(text: string, fail: () => Error): Buffer {
  // Buffer.from skips what is not base64; a round trip proves nothing was skipped.
  const bytes = Buffer.from(text, 'base64');
  if (!BASE64.test(text) || bytes.toString('base64').replace(/=+$/, '') !== text.replace(/=+$/, ''))
    throw fail();
  return bytes;
}

/** Every header a signer sets; copies sent by the caller are dropped so that only ours reach the target. */
const SIGNATURE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'x-signature'];

/**
 * The call with signature headers added (the call itself is not changed). Sign each attempt right
 * before it is sent: `webhook-timestamp` is the attempt's time (receivers refuse old ones), while
 * `webhook-id` is derived from the requestId and so the same on every retry.
 *
 * Throws a RequesterError `invalid_request` for an unknown key id (a permanent error of the request).
 */
export function signRequest(
  call: HttpCall,
  signing: { keyId: string; requestId: string; client?: string | undefined },
  keys: SigningKeys,
  nowMs: number = Date.now(),
): HttpCall {
  const key = keyOf(keys, signing.keyId);
  const headers = Object.fromEntries(
    Object.entries(call.headers).filter(([name]) => !SIGNATURE_HEADERS.includes(name.toLowerCase())),
  );
  const body = Buffer.from(call.body ?? '', 'utf8');
  if (key.scheme === 'hmac-sha256') {
    headers['x-signature'] = key.secrets.map((secret) => hmac(secret, [body]).toString('hex')).join(',');
  } else {
    const id = webhookId(signing.requestId, signing.client);
    const timestamp = String(Math.floor(nowMs / 1000));
    const signed = [Buffer.from(`${id}.${timestamp}.`, 'utf8'), body];
    headers['webhook-id'] = id;
    headers['webhook-timestamp'] = timestamp;
    headers['webhook-signature'] = key.secrets
      .map((secret) => `v1,${hmac(secret, signed).toString('base64')}`)
      .join(' ');
  }
  return { ...call, headers };
}

/**
 * The keys, when they hold `keyId`; else the error a request naming it gets (also a wake-up, which
 * signs nothing): `invalid_config` when this executor has no keys, `invalid_request` for an unknown id.
 */
export function requireSigningKey(keys: SigningKeys | undefined, keyId: string): SigningKeys {
  if (!keys) throw new RequesterError('invalid_config', 'this executor has no signing keys (SIGNING_KEYS)');
  keyOf(keys, keyId);
  return keys;
}

function keyOf(keys: SigningKeys, keyId: string): SigningKey {
  const key = keysOf(keys).get(keyId);
  if (key) return key;
  const shown = JSON.stringify(keyId.slice(0, 128));
  throw new RequesterError('invalid_request', `unknown signing key id ${shown}`, {
    details: { field: 'meta.signing.keyId' },
  });
}

/**
 * `msg_` + the request's Idempotency-Key UUID: one message id per request (a client's requestId),
 * across retries and executors.
 */
export function webhookId(requestId: string, client?: string): string {
  return `msg_${idempotencyKey(requestId, client)}`;
}

function hmac(secret: Buffer, parts: readonly Buffer[]): Buffer {
  const mac = createHmac('sha256', secret);
  for (const part of parts) mac.update(part);
  return mac.digest();
}
