import { ConfigError } from '../errors/index.ts';

/**
 * Signing secrets (docs/architecture.md §5 outbound hygiene): their text form and the parsed keys.
 * One parser for both places a signing key is kept: a `signing` credential of the store (the way,
 * `requester credentials create <keyId> --signing-secret-file …`) and the deprecated SIGNING_KEYS
 * variable. The executor's signer (executor/src/signing) turns them into headers.
 *
 * A secret's text:
 *   whsec_<base64>      Standard Webhooks: `webhook-id`, `webhook-timestamp` and
 *                       `webhook-signature: v1,<base64 HMAC-SHA256("id.timestamp.body")>`, keyed
 *                       with the base64-decoded bytes (the usual `whsec_` secret format).
 *   hex:<hex> | base64:<base64> | text:<utf-8>
 *                       plain: `x-signature: <hex HMAC-SHA256(body)>`, keyed with those bytes. No
 *                       timestamp: the body alone is signed, as receivers of this scheme expect, so
 *                       it does not protect against replays (prefer Standard Webhooks).
 * A key id with several secrets signs with every one, in order (key rotation: the receiver accepts
 * any one): space-separated `v1,…` entries, or comma-separated `x-signature` values. All secrets
 * of one id use one scheme. Each secret has at least 16 bytes.
 *
 * SIGNING_KEYS (deprecated): `;`-separated entries `<keyId>=<secret>`; an id listed several times
 * has several secrets.
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

/** The signer's access to the secrets (signingKeyOf); nothing else has one. */
let keysOf: (keys: SigningKeys) => ReadonlyMap<string, SigningKey>;

/**
 * Parsed signing keys (parseSigningKeys, signingKeysOf). Logs and serializes as its key ids only:
 * the secrets sit in a private field and leave the process only as HMACs.
 */
export class SigningKeys {
  readonly #keys: ReadonlyMap<string, SigningKey>;
  /** The key ids (not secret). A plain field: loggers may copy the object, private fields do not follow. */
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

/** The secrets of `keyId` (for the signer alone: they must leave the process only as HMACs). */
export function signingKeyOf(keys: SigningKeys, keyId: string): SigningKey | undefined {
  return keysOf(keys).get(keyId);
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
    const fail = (problem: string) => new ConfigError(`${at}: ${problem}`, { variable, keyId });
    const decoded = decodeSigningSecret(entry.slice(eq + 1).trim());
    if ('problem' in decoded) throw fail(decoded.problem);
    const key = keys.get(keyId) ?? { scheme: decoded.scheme, secrets: [] };
    if (key.scheme !== decoded.scheme)
      throw fail(
        `a key id signs with one scheme; this secret is ${decoded.scheme}, an earlier one ${key.scheme}`,
      );
    key.secrets.push(decoded.secret);
    keys.set(keyId, key);
  });
  return new SigningKeys(keys);
}

/**
 * The key `keyId` holding `secrets` (a `signing` credential's, already validated by the store:
 * checkSigningSecrets), as SigningKeys of that one id.
 */
export function signingKeysOf(keyId: string, secrets: string | readonly string[]): SigningKeys {
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  const problem = checkSigningSecrets(list)[0];
  if (problem) throw new ConfigError(`signing key ${JSON.stringify(keyId)}: ${problem.message}`, { keyId });
  const decoded = list.map((text) => decodeSigningSecret(text.trim()) as Decoded);
  const scheme = (decoded[0] as Decoded).scheme;
  return new SigningKeys(new Map([[keyId, { scheme, secrets: decoded.map((d) => d.secret) }]]));
}

/**
 * What is wrong with a list of signing secrets, by index (empty: nothing). Messages never quote
 * a secret.
 */
export function checkSigningSecrets(list: readonly string[]): Array<{ index: number; message: string }> {
  const problems: Array<{ index: number; message: string }> = [];
  let first: SigningScheme | undefined;
  list.forEach((text, index) => {
    const decoded = decodeSigningSecret(text.trim());
    if ('problem' in decoded) problems.push({ index, message: decoded.problem });
    else if (first !== undefined && decoded.scheme !== first)
      problems.push({
        index,
        message: `a key signs with one scheme; this secret is ${decoded.scheme}, an earlier one ${first}`,
      });
    else first = decoded.scheme;
  });
  return problems;
}

/** The scheme of valid signing secrets (what a credential's summary shows of them). */
export function signingSchemeOf(list: readonly string[]): SigningScheme | undefined {
  const decoded = list[0] === undefined ? undefined : decodeSigningSecret(list[0].trim());
  return decoded && 'scheme' in decoded ? decoded.scheme : undefined;
}

type Decoded = { scheme: SigningScheme; secret: Buffer };

function decodeSigningSecret(text: string): Decoded | { problem: string } {
  let scheme: SigningScheme = 'hmac-sha256';
  let bytes: Buffer | undefined;
  if (text.startsWith('whsec_')) {
    scheme = 'standard-webhooks';
    bytes = base64Bytes(text.slice(6));
    if (!bytes) return { problem: 'the whsec_ secret is not base64' };
  } else if (text.startsWith('hex:')) {
    if (!HEX.test(text.slice(4))) return { problem: 'the hex: secret is not an even number of hex digits' };
    bytes = Buffer.from(text.slice(4), 'hex');
  } else if (text.startsWith('base64:')) {
    bytes = base64Bytes(text.slice(7));
    if (!bytes) return { problem: 'the base64: secret is not base64' };
  } else if (text.startsWith('text:')) {
    bytes = Buffer.from(text.slice(5), 'utf8');
  } else {
    return { problem: 'the secret must start with whsec_, hex:, base64: or text:' };
  }
  if (bytes.length < MIN_SECRET_BYTES)
    return { problem: `the secret has ${bytes.length} bytes; at least ${MIN_SECRET_BYTES} are needed` };
  return { scheme, secret: bytes };
}

function base64Bytes(text: string): Buffer | undefined {
  // Buffer.from skips what is not base64; a round trip proves nothing was skipped.
  const bytes = Buffer.from(text, 'base64');
  if (!BASE64.test(text) || bytes.toString('base64').replace(/=+$/, '') !== text.replace(/=+$/, ''))
    return undefined;
  return bytes;
}
