import { createHash, hkdfSync, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  decryptWith,
  encryptWith,
  type OAuth2Secrets,
  type OpenedCredential,
} from '@requester/shared/credentials';
import { RequesterError } from '@requester/shared/errors';
import { counter } from '@requester/shared/metrics';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';
import type { Egress } from '../egress/index.ts';
import type { HttpClient } from '../http/index.ts';

/**
 * OAuth2 access tokens of the client-credentials grant (RFC 6749 §4.4), shared by every executor
 * through Redis:
 * - a token is kept (encrypted, under a key derived from the client secret) until shortly before
 *   it expires (`expires_in` minus a tenth of it, at most 30 s), and in memory beside it;
 * - one fetch at a time per credential cluster-wide: the executor that takes the Redis lock asks
 *   the token endpoint, the others wait for the token it stores (one in-process wait per
 *   credential, however many calls need it);
 * - a token endpoint that fails is asked again at most once per FAILURE_HOLD_MS per credential:
 *   the failure is kept that long and every waiter fails with it (`credential_unavailable`);
 * - the whole wait is bounded by OAUTH2_TOKEN_TIMEOUT.
 * Keys share the credential's hash tag (one Redis Cluster slot):
 * `<prefix>:cred:{<name>}:<version>:token|lock|error`. A rotated credential (new version) never
 * sees its old token.
 */

const COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'credentials');
const FAILURE_HOLD_MS = 1000;
const POLL_MS = 20;
const DEFAULT_LIFETIME_S = 300;
const MAX_SKEW_MS = 30_000;

const fetches = counter(
  'credential_token_fetches_total',
  'OAuth2 token requests made to token endpoints, by outcome (ok, failed)',
  ['outcome'],
);

export interface TokenSettings {
  redis: RedisClient;
  prefix: string;
  http: HttpClient;
  /** OAUTH2_TOKEN_TIMEOUT. */
  timeoutMs: number;
}

interface Held {
  token: string;
  expiresAtMs: number;
}

export class TokenSource {
  readonly #settings: TokenSettings;
  readonly #run;
  readonly #memory = new Map<string, Held>();
  readonly #waits = new Map<string, Promise<string>>();

  constructor(settings: TokenSettings) {
    this.#settings = settings;
    this.#run = luaScripts<'claim' | 'drop'>(settings.redis, COMMANDS, 3);
  }

  /** A valid access token for `credential` (which has `oauth2`); throws `credential_unavailable`. */
  async token(credential: OpenedCredential, egress: Egress): Promise<string> {
    const keys = this.#keys(credential);
    const held = this.#memory.get(keys.token);
    if (held && held.expiresAtMs > Date.now()) return held.token;
    let wait = this.#waits.get(keys.token);
    if (!wait) {
      wait = this.#obtain(credential, egress).finally(() => this.#waits.delete(keys.token));
      this.#waits.set(keys.token, wait);
    }
    return wait;
  }

  /**
   * The target refused `token` (401): forget it here and in Redis, unless another executor has
   * already replaced it, so that the next `token()` brings a fresh one.
   */
  async refused(credential: OpenedCredential, token: string): Promise<void> {
    const keys = this.#keys(credential);
    if (this.#memory.get(keys.token)?.token === token) this.#memory.delete(keys.token);
    await this.#run('drop', [keys.token], [fingerprint(token)]);
  }

  #keys(credential: OpenedCredential) {
    const base = `${this.#settings.prefix}:cred:{${credential.name}}:${credential.version}`;
    return { token: `${base}:token`, lock: `${base}:lock`, error: `${base}:error` };
  }

  async #obtain(credential: OpenedCredential, egress: Egress): Promise<string> {
    const { redis, timeoutMs } = this.#settings;
    const keys = this.#keys(credential);
    const oauth2 = credential.secrets.oauth2 as OAuth2Secrets;
    const key = cacheKey(credential, oauth2);
    const deadline = Date.now() + timeoutMs;
    const owner = randomBytes(12).toString('base64url');
    while (Date.now() < deadline) {
      const [state, value] = (await this.#run(
        'claim',
        [keys.token, keys.error, keys.lock],
        [owner, timeoutMs],
      )) as [string, string | undefined];
      if (state === 'token') {
        const opened = openToken(value ?? '', key);
        if (opened && opened.expiresAtMs > Date.now()) return this.#remember(keys.token, opened);
        // Sealed under another key (a secret rotated in place): drop it and claim again.
        await this.#run('drop', [keys.token], [value ?? '']);
        continue;
      }
      if (state === 'failed') throw unavailable(value ?? 'the token endpoint failed');
      if (state === 'fetch') {
        try {
          const fresh = await this.#fetch(oauth2, egress, deadline);
          await redis.set(
            keys.token,
            sealToken(fresh, key),
            'PX',
            Math.max(1, fresh.expiresAtMs - Date.now()),
          );
          return this.#remember(keys.token, fresh);
        } catch (err) {
          const message = (err as Error).message;
          await redis.set(keys.error, message, 'PX', FAILURE_HOLD_MS);
          throw unavailable(message);
        } finally {
          await this.#run('drop', [keys.lock], [owner]);
        }
      }
      await sleep(POLL_MS);
    }
    throw unavailable(
      `no OAuth2 token within ${timeoutMs} ms (OAUTH2_TOKEN_TIMEOUT): another executor holds the fetch`,
    );
  }

  #remember(key: string, held: Held): string {
    this.#memory.set(key, held);
    if (this.#memory.size > 10_000) this.#memory.delete(this.#memory.keys().next().value as string);
    return held.token;
  }

  /** One token request; the error's message names the endpoint and what went wrong, never a secret. */
  async #fetch(oauth2: OAuth2Secrets, egress: Egress, deadline: number): Promise<Held> {
    const endpoint = endpointName(oauth2.tokenUrl);
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (oauth2.scope) form.set('scope', oauth2.scope);
    if (oauth2.audience) form.set('audience', oauth2.audience);
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    if (oauth2.authMethod === 'client_secret_post') {
      form.set('client_id', oauth2.clientId);
      form.set('client_secret', oauth2.clientSecret);
    } else {
      // RFC 6749 §2.3.1: id and secret form-encoded, then joined by ':' in Basic.
      const pair = `${formEncode(oauth2.clientId)}:${formEncode(oauth2.clientSecret)}`;
      headers.authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
    }
    const call = this.#settings.http.call(
      { method: 'POST', uri: oauth2.tokenUrl, headers, body: form.toString() },
      egress,
    );
    const left = deadline - Date.now();
    const timer = sleep(Math.max(0, left), 'timeout' as const, { ref: false });
    const outcome = await Promise.race([call, timer]);
    if (outcome === 'timeout') {
      fetches.inc({ outcome: 'failed' });
      throw new Error(
        `token endpoint ${endpoint} did not answer within ${this.#settings.timeoutMs} ms (OAUTH2_TOKEN_TIMEOUT)`,
      );
    }
    if (outcome.kind === 'failure') {
      fetches.inc({ outcome: 'failed' });
      throw new Error(`token endpoint ${endpoint}: ${outcome.error.code}: ${outcome.error.message}`);
    }
    const body = parseJson(outcome.body);
    if (outcome.status !== 200 || typeof body?.access_token !== 'string' || body.access_token === '') {
      fetches.inc({ outcome: 'failed' });
      // RFC 6749 §5.2 error codes (invalid_client, invalid_scope...) are safe to show; the body is not.
      const code =
        typeof body?.error === 'string' && /^[\x20-\x7e]{1,64}$/.test(body.error) ? ` (${body.error})` : '';
      throw new Error(`token endpoint ${endpoint} answered ${outcome.status}${code} without an access token`);
    }
    const type = typeof body.token_type === 'string' ? body.token_type : 'bearer';
    if (type.toLowerCase() !== 'bearer') {
      fetches.inc({ outcome: 'failed' });
      throw new Error(
        `token endpoint ${endpoint} issued a ${type.slice(0, 32)} token; only bearer tokens are supported`,
      );
    }
    fetches.inc({ outcome: 'ok' });
    const lifetimeMs = (positiveNumber(body.expires_in) ?? DEFAULT_LIFETIME_S) * 1000;
    const skewMs = Math.min(MAX_SKEW_MS, lifetimeMs / 10);
    return { token: body.access_token, expiresAtMs: Date.now() + lifetimeMs - skewMs };
  }
}

function unavailable(message: string): RequesterError {
  return new RequesterError('credential_unavailable', message);
}

function endpointName(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

function formEncode(text: string): string {
  return new URLSearchParams({ x: text }).toString().slice(2);
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function positiveNumber(value: unknown): number | undefined {
  const n = typeof value === 'string' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : undefined;
}

/** The key tokens are encrypted with in Redis: derived from the client secret, per credential version. */
function cacheKey(credential: OpenedCredential, oauth2: OAuth2Secrets): Buffer {
  const salt = `${credential.id}:${credential.version}`;
  return Buffer.from(hkdfSync('sha256', oauth2.clientSecret, salt, 'requester oauth2 token cache', 32));
}

/** A token's fingerprint: what `refused` compares, without the token itself. */
function fingerprint(token: string): string {
  return `${createHash('sha256').update(token).digest('base64url').slice(0, 22)}.`;
}

/** `<fingerprint>.<expiresAtMs>.<base64 AES-GCM of the token>` */
function sealToken(held: Held, key: Buffer): string {
  const sealed = encryptWith(key, Buffer.from(held.token, 'utf8'), 'token');
  return `${fingerprint(held.token)}${held.expiresAtMs}.${sealed.toString('base64')}`;
}

function openToken(value: string, key: Buffer): Held | undefined {
  const [, expires, sealed] = value.split('.');
  try {
    const token = decryptWith(key, Buffer.from(sealed ?? '', 'base64'), 'token').toString('utf8');
    return { token, expiresAtMs: Number(expires) };
  } catch {
    return undefined; // written under another key (e.g. a secret rotated in place): fetch anew
  }
}
