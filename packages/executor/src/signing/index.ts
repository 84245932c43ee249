import { createHmac } from 'node:crypto';
import type { SecretText } from '@requester/shared/config';
import {
  credentialOriginRefusal,
  parseSigningKeys,
  type SigningKeys,
  signingKeyOf,
  signingKeysOf,
  signingSecretsOf,
} from '@requester/shared/credentials';
import { RequesterError } from '@requester/shared/errors';
import type { CredentialResolver } from '../credentials/resolve.ts';
import type { HttpCall } from '../http/index.ts';
import { idempotencyKey } from '../http/request.ts';

export {
  parseSigningKeys,
  type SigningKey,
  SigningKeys,
  type SigningScheme,
} from '@requester/shared/credentials';

/**
 * Request signing (docs/architecture.md §5 outbound hygiene), opt-in per request by
 * `meta.signing.keyId`. Secrets only ever leave the process as HMACs. The schemes and the secrets'
 * text are the shared parser's (@requester/shared/credentials, signing.ts).
 *
 * Where a key id's secrets come from (SigningKeyring): the credential store, a `signing`
 * credential of that name (the way: rotated, revoked and audited like every credential); else the
 * deprecated SIGNING_KEYS variable of this executor.
 */

/** The keys of SIGNING_KEYS (deprecated; kept redacted in the config until here), undefined when unset. */
export function signingKeysFromConfig(config: { signingKeys: SecretText }): SigningKeys | undefined {
  const text = config.signingKeys.reveal();
  if (text.trim() === '') return undefined;
  return parseSigningKeys(text);
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
  if (!keys)
    throw new RequesterError(
      'invalid_config',
      'this executor has no signing keys (a signing credential: requester credentials create --signing-secret-file)',
    );
  keyOf(keys, keyId);
  return keys;
}

function keyOf(keys: SigningKeys, keyId: string) {
  const key = signingKeyOf(keys, keyId);
  if (key) return key;
  throw unknownKey(keyId);
}

function unknownKey(keyId: string): RequesterError {
  const shown = JSON.stringify(keyId.slice(0, 128));
  return new RequesterError('invalid_request', `unknown signing key id ${shown}`, {
    details: { field: 'meta.signing.keyId' },
  });
}

/**
 * Where the signer finds a key id's secrets: first the credential store (a live credential of
 * that name holding `signing`; read through the executor's shared CredentialResolver, so at most
 * once per CREDENTIALS_CACHE_TTL, and a rotation or revocation reaches every executor within it),
 * then the deprecated SIGNING_KEYS of this executor, for ids the store does not know.
 *
 * A key of the store signs only for the origins named with its credential: `keys` given the call
 * it is about to sign refuses any other with `credential_origin_refused`, so that Requester is no
 * signing oracle for whatever hosts a caller may reach. SIGNING_KEYS carry no origins (deprecated:
 * import them, then name their origins).
 *
 * Throws RequesterError: `invalid_request` (unknown id, or a credential without signing secrets),
 * `credential_revoked` (revoked in the store: SIGNING_KEYS does not bring it back),
 * `credential_origin_refused` (the call's origin is not one of the credential's),
 * `dependency_unavailable` (the store does not answer: the task comes back, unattempted).
 */
export class SigningKeyring {
  readonly #resolver: CredentialResolver | undefined;
  readonly #legacy: SigningKeys | undefined;
  /** Parsed keys by credential id and version: each version is decoded once. */
  readonly #parsed = new Map<string, SigningKeys>();

  constructor(options: { resolver?: CredentialResolver | undefined; legacy?: SigningKeys | undefined }) {
    this.#resolver = options.resolver?.hasStore ? options.resolver : undefined;
    this.#legacy = options.legacy;
  }

  /** Signing keys holding `keyId`, for signing `call` when given (its origin is checked). */
  async keys(keyId: string, call?: Pick<HttpCall, 'uri' | 'headers'>): Promise<SigningKeys> {
    const stored = await this.#stored(keyId, call);
    if (stored) return stored;
    if (this.#legacy && signingKeyOf(this.#legacy, keyId)) return this.#legacy;
    if (!this.#resolver && !this.#legacy)
      throw new RequesterError(
        'invalid_config',
        'this executor has no signing keys: it has no CREDENTIALS_MASTER_KEY (signing credentials) nor SIGNING_KEYS',
      );
    throw unknownKey(keyId);
  }

  async #stored(
    keyId: string,
    call: Pick<HttpCall, 'uri' | 'headers'> | undefined,
  ): Promise<SigningKeys | undefined> {
    if (!this.#resolver) return undefined;
    let resolved: Awaited<ReturnType<CredentialResolver['resolve']>>;
    try {
      resolved = await this.#resolver.resolve(keyId);
    } catch {
      throw new RequesterError(
        'dependency_unavailable',
        `signing key ${JSON.stringify(keyId)}: the credential store is unavailable`,
      );
    }
    if (resolved.kind === 'refused') {
      if (resolved.code === 'credential_revoked')
        throw new RequesterError('credential_revoked', `signing key ${resolved.message}`, {
          details: { field: 'meta.signing.keyId' },
        });
      return undefined;
    }
    const { credential } = resolved;
    const refusal =
      call && credentialOriginRefusal(credential.name, credential.origins, call.uri, call.headers);
    if (refusal)
      throw new RequesterError('credential_origin_refused', refusal, {
        details: { field: 'meta.signing.keyId' },
      });
    const secrets = signingSecretsOf(credential.secrets);
    if (secrets.length === 0)
      throw new RequesterError(
        'invalid_request',
        `credential ${credential.name} holds no signing secret (meta.signing.keyId)`,
        { details: { field: 'meta.signing.keyId' } },
      );
    const version = `${credential.id}:${credential.version}`;
    let keys = this.#parsed.get(version);
    if (!keys) {
      keys = signingKeysOf(keyId, secrets);
      this.#parsed.set(version, keys);
      if (this.#parsed.size > 1000) this.#parsed.delete(this.#parsed.keys().next().value as string);
    }
    return keys;
  }
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
