/**
 * @module
 * Kafka entry (docs/architecture.md §10): who may put what on `in`. Requester's own writers of `in`
 * (the ingress, the relay, DLQ replays) sign each record's value with a deployment secret (HMAC-
 * SHA256 in the `requester-entry` header); the router trusts the `meta.client` of a signed record.
 * A record without a valid signature was written straight to `in` by a producer: it may claim no
 * client, or one whose API key an operator allowed for Kafka entry (`requester keys create|update
 * --kafka-entry`). The secret needs no configuration: it is generated once and kept in PostgreSQL
 * (`requester_secrets`, migration 005), which every role that writes or routes `in` reaches.
 */
import { createHmac, createSecretKey, type KeyObject, randomBytes, timingSafeEqual } from 'node:crypto';
import { headerText, type RecordHeaders } from '../kafka/types.ts';
import type { Sql } from '../pg/index.ts';

/** The header carrying the signature of an `in` record's value. */
export const ENTRY_HEADER = 'requester-entry';
const VERSION = 'v1';
/** Domain separation: this secret signs `in` values and nothing else. */
const CONTEXT = 'requester-entry/v1\n';
const SECRET_NAME = 'kafka-entry';
const SECRET_BYTES = 32;

/** Signs and verifies `in` record values with the deployment's entry secret. */
export class EntrySigner {
  /** A KeyObject: on Node 24 an HMAC keyed by one costs about a third of one keyed by raw bytes. */
  readonly #secret: KeyObject;

  constructor(secret: Buffer) {
    if (secret.length < 16) throw new RangeError('the entry secret must be at least 16 bytes');
    this.#secret = createSecretKey(secret);
  }

  /** The header value for a record whose value is `value` (the exact bytes produced). */
  sign(value: Buffer | string): string {
    return `${VERSION}.${this.#mac(value).toString('base64url')}`;
  }

  /** The record's headers with the signature of `value` added. */
  signed(value: Buffer | string, headers?: Record<string, Buffer | string>): Record<string, Buffer | string> {
    return { ...headers, [ENTRY_HEADER]: this.sign(value) };
  }

  /** Whether `headers` carry a valid signature of `value` (constant time). */
  verify(value: Buffer | null, headers: RecordHeaders | undefined): boolean {
    const header = headerText(headers, ENTRY_HEADER);
    if (value === null || !header?.startsWith(`${VERSION}.`)) return false;
    const presented = Buffer.from(header.slice(VERSION.length + 1), 'base64url');
    const expected = this.#mac(value);
    return presented.length === expected.length && timingSafeEqual(presented, expected);
  }

  #mac(value: Buffer | string): Buffer {
    return createHmac('sha256', this.#secret).update(CONTEXT).update(value).digest();
  }

  toJSON(): string {
    return '[redacted]';
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return 'EntrySigner [redacted]';
  }
}

/**
 * The deployment's entry signer: its secret is created by whichever process asks first (a race
 * between processes is settled by the primary key: every one reads back the same row).
 */
export async function loadEntrySigner(sql: Sql): Promise<EntrySigner> {
  await sql`insert into requester_secrets (name, secret) values (${SECRET_NAME}, ${randomBytes(SECRET_BYTES)})
    on conflict (name) do nothing`;
  const [row] = await sql<Array<{ secret: Buffer }>>`select secret from requester_secrets
    where name = ${SECRET_NAME}`;
  if (!row) throw new Error('the entry secret could not be read back from requester_secrets');
  return new EntrySigner(row.secret);
}

interface Cached {
  /** The key's credentials scope when it is allowed for Kafka entry; undefined = not allowed. */
  credentials: readonly string[] | undefined;
  /** The key's default start-by deadline (`keys --deadline`), if it has one. */
  deadline?: string;
  expiresAt: number;
}

/**
 * Which client names a record written straight to `in` may claim: those of live API keys marked
 * for Kafka entry, and with each the credentials its key may name (its `--credentials` scope,
 * which then holds on Kafka as on HTTP). Each answer is trusted for `ttlMs` (AUTH_CACHE_TTL: the
 * bound on how long a revoked key, or one whose Kafka entry or scope was withdrawn, is still
 * accepted); at most `maxCached` names are remembered.
 */
export class KafkaEntryClients {
  readonly #sql: Sql;
  readonly #ttlMs: number;
  readonly #maxCached: number;
  readonly #now: () => number;
  readonly #cache = new Map<string, Cached>();

  constructor(sql: Sql, options: { ttlMs: number; maxCached?: number; now?: () => number }) {
    this.#sql = sql;
    this.#ttlMs = options.ttlMs;
    this.#maxCached = options.maxCached ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** The names among `names` that may be claimed; one query for those not cached. */
  async allowed(names: Iterable<string>): Promise<Set<string>> {
    return new Set((await this.scopes(names)).keys());
  }

  /**
   * The names among `names` that may be claimed, each with the credentials its key may name; one
   * query for those not cached.
   */
  async scopes(names: Iterable<string>): Promise<Map<string, readonly string[]>> {
    const allowed = new Map<string, readonly string[]>();
    for (const [name, key] of await this.#keys(names))
      if (key.credentials) allowed.set(name, key.credentials);
    return allowed;
  }

  /**
   * The default start-by deadline of each name among `names` that may be claimed and whose key
   * has one (`keys --deadline`): the router gives it to such a client's records without a
   * deadline of their own, as the ingress does to its HTTP requests. Cached with the scopes.
   */
  async deadlines(names: Iterable<string>): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (const [name, key] of await this.#keys(names))
      if (key.credentials && key.deadline !== undefined) found.set(name, key.deadline);
    return found;
  }

  /** What the keys of `names` allow, from the cache or one query for those not cached. */
  async #keys(names: Iterable<string>): Promise<Map<string, Cached>> {
    const now = this.#now();
    const known = new Map<string, Cached>();
    const unknown = new Set<string>();
    for (const name of names) {
      const cached = this.#cache.get(name);
      if (cached && cached.expiresAt > now) known.set(name, cached);
      else unknown.add(name);
    }
    if (unknown.size === 0) return known;
    const rows = await this.#sql<
      Array<{ name: string; credentials: string[] | null; deadline: string | null }>
    >`select name, credentials, deadline from requester_api_keys
      where name = any(${[...unknown]}) and kafka_entry and revoked_at is null`;
    const found = new Map(rows.map((row) => [row.name, row]));
    for (const name of unknown) {
      const row = found.get(name);
      const entry: Cached = {
        credentials: row ? (row.credentials ?? []) : undefined,
        ...(row?.deadline ? { deadline: row.deadline } : {}),
        expiresAt: now + this.#ttlMs,
      };
      this.#remember(name, entry);
      known.set(name, entry);
    }
    return known;
  }

  #remember(name: string, entry: Cached): void {
    this.#cache.delete(name);
    this.#cache.set(name, entry);
    for (const oldest of this.#cache.keys()) {
      if (this.#cache.size <= this.#maxCached) break;
      this.#cache.delete(oldest);
    }
  }
}
