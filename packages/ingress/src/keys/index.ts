import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import {
  CREDENTIAL_NAME_PATTERN,
  DESTINATION_NAME_PATTERN,
  defaultDeadlineProblem,
  MAX_CLIENT_LENGTH,
} from '@requester/shared/contract';
import { ValidationError } from '@requester/shared/errors';
import type { Sql } from '@requester/shared/pg';
import { durationToMs } from '@requester/shared/time';

/**
 * API keys of the HTTP API, kept in PostgreSQL (`requester_api_keys`, migration 002). A key is
 * shown once as `rqk_<id>_<secret>`: the id is public (it finds the row), the secret is 256
 * random bits of which only the SHA-256 is stored. A stolen table does not give a usable key, and
 * a fast hash is enough for a secret nobody can guess.
 */
export const TOKEN_PREFIX = 'rqk_';
const ID_BYTES = 6;
const SECRET_BYTES = 32;
const TOKEN_PATTERN = /^rqk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/;
const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** What a key may do: checked by the ingress before anything is written to Kafka. */
export interface KeyScopes {
  /**
   * Target host patterns (`api.x.com`, `*.partner.example`), each with an optional port
   * (`127.0.0.1:8081`, `*.partner.example:443`; without one, any port); undefined = any host.
   */
  hosts?: string[];
  /**
   * Its callers may send a `Host` header naming another host than the request URI's (virtual
   * hosts behind one address); without it such a header is refused (400).
   */
  virtualHosts?: boolean;
  /** Requests per window, e.g. `200/s`, `1000/10m`; undefined = no per-key rate. */
  rate?: string;
  /** May make sync calls (`meta.sync: true`). */
  sync: boolean;
  /** May schedule beyond REDIS_HORIZON (the PostgreSQL outbox). */
  schedule: boolean;
  /** Largest request envelope (bytes); undefined = MAX_BODY_BYTES. */
  maxBodyBytes?: number;
  /** The admin API and operator UI of the admin port: `read` sees, `write` also acts; undefined = none. */
  admin?: AdminScope;
  /**
   * Records written straight to Kafka `in` may claim this key's name as `meta.client`
   * (docs/architecture.md §10): whoever the broker lets write `in` may then act as this client.
   */
  kafkaEntry: boolean;
  /** Target credentials its requests may name (`meta.credentials`); undefined = none. */
  credentials?: string[];
  /**
   * The destinations its requests may name (`meta.destination`); undefined = any, and absolute
   * URIs too. A key limited to destinations calls nothing else.
   */
  destinations?: string[];
  /**
   * The client's share of the workers relative to other clients' (the queue's weighted fair
   * share, docs/architecture.md §6), up to MAX_KEY_WEIGHT; undefined = 1.
   */
  weight?: number;
  /**
   * The most of the client's tasks in flight at once across every executor (the queue's per-client
   * cap, docs/architecture.md §6); undefined = no cap.
   */
  maxInFlight?: number;
  /**
   * The default start-by deadline of its requests that give no `meta.deadline`: a Go duration
   * counted from when the task is first due (`defaultDeadlineAt`); undefined = none.
   */
  deadline?: string;
}

/** The largest `--max-in-flight` (a sanity bound, far above any executor fleet's concurrency). */
export const MAX_KEY_IN_FLIGHT = 1_000_000;

/** The largest `--weight` (the queue's MAX_CLIENT_WEIGHT: shares are relative). */
export const MAX_KEY_WEIGHT = 1000;

export type AdminScope = 'read' | 'write';
export const ADMIN_SCOPES: readonly AdminScope[] = ['read', 'write'];

export interface KeyInfo extends KeyScopes {
  id: string;
  name: string;
  createdAt: Date;
  rotatedAt?: Date;
  revokedAt?: Date;
  /** Until when the secret replaced by the last rotation still works. */
  previousExpiresAt?: Date;
}

/** A key as the ingress checks it: the info plus the hashes of the secrets it accepts. */
export interface KeyRecord extends KeyInfo {
  secretHash: Buffer;
  previousHash?: Buffer;
}

/** A parsed `--rate`: `value` requests per `duration` (a Go duration). */
export interface KeyRate {
  value: number;
  duration: string;
}

const RATE_UNITS: Record<string, string> = { ms: 'ms', s: 's', sec: 's', m: 'm', min: 'm', h: 'h' };

/** `200/s`, `50/100ms`, `1000/10m`, `5000/h`; throws a ValidationError naming `rate` otherwise. */
export function parseRate(text: string): KeyRate {
  const match = /^(\d+)\/(\d*)([a-z]+)$/.exec(text.trim());
  const unit = match ? RATE_UNITS[match[3] ?? ''] : undefined;
  const value = Number(match?.[1]);
  if (!match || !unit || !Number.isSafeInteger(value) || value < 1) {
    throw new ValidationError([
      { path: 'rate', message: `${JSON.stringify(text)} is not <count>/<unit>, e.g. 200/s or 1000/10m` },
    ]);
  }
  const duration = `${match[2] || '1'}${unit}`;
  if (durationToMs(duration) < 1)
    throw new ValidationError([{ path: 'rate', message: 'the window must be at least 1ms' }]);
  return { value, duration };
}

/**
 * Host patterns: a host name, or `*.` + a domain (any name under it, not the domain itself), each
 * with an optional `:port` (an IPv6 literal in brackets: `[::1]:8080`); without a port, any port.
 */
export function checkHostPattern(pattern: string): string {
  const text = pattern.trim().toLowerCase();
  const { host, port } = splitHostPattern(text);
  const bare = host.startsWith('*.') ? host.slice(2) : host;
  const validPort =
    port === undefined || (/^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535);
  if (
    !validPort ||
    (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(bare) && !isIpLiteral(bare))
  ) {
    throw new ValidationError([
      {
        path: 'hosts',
        message: `${JSON.stringify(pattern)} is not a host name or *.domain, with an optional :port`,
      },
    ]);
  }
  return port === undefined ? host : `${host}:${Number(port)}`;
}

/** A host pattern's host and port (undefined: any port). */
export function splitHostPattern(pattern: string): { host: string; port?: string } {
  const match = /^(\[[^\]]*\]|[^:]*):(\d*)$/.exec(pattern);
  return match ? { host: match[1] as string, port: match[2] as string } : { host: pattern };
}

function isIpLiteral(text: string): boolean {
  return /^[0-9.]+$/.test(text) || /^\[[0-9a-f:.]+\]$/.test(text);
}

export function checkKeyName(name: string): string {
  if (name.length > MAX_CLIENT_LENGTH || !NAME_PATTERN.test(name)) {
    throw new ValidationError([
      {
        path: 'name',
        message: `must be 1-${MAX_CLIENT_LENGTH} letters, digits, '.', '_' or '-', starting with a letter or digit`,
      },
    ]);
  }
  return name;
}

/** The id and secret of a presented token; undefined when it is not shaped like one of ours. */
export function parseToken(token: string): { id: string; secret: string } | undefined {
  const match = TOKEN_PATTERN.exec(token);
  return match ? { id: match[1] as string, secret: match[2] as string } : undefined;
}

/** SHA-256 of a 256-bit random secret (an API key's, or an operator UI session id). */
export function hashSecret(secret: string): Buffer {
  return hash('sha256', secret, 'buffer');
}

/**
 * Whether `secret` opens `record` at `now`: its current secret, or the one replaced by a rotation
 * within its grace period. Both hashes are compared in constant time, always, so the answer's
 * timing tells nothing about which one matched or how much of it.
 */
export function secretMatches(record: KeyRecord, secret: string, now = Date.now()): boolean {
  return secretHashAccepted(record, hashSecret(secret), now);
}

/**
 * secretMatches for a secret known by its hash (hashSecret): what an operator UI session keeps of
 * the secret it was opened with, so that it ends when that secret is rotated away.
 */
export function secretHashAccepted(record: KeyRecord, presented: Buffer, now = Date.now()): boolean {
  const current = timingSafeEqual(presented, record.secretHash);
  const previous = record.previousHash ?? Buffer.alloc(presented.length);
  const graceOpen = (record.previousExpiresAt?.getTime() ?? 0) > now;
  const old = timingSafeEqual(presented, previous) && graceOpen && record.previousHash !== undefined;
  return current || old;
}

interface KeyRow {
  id: string;
  name: string;
  secret_hash: Buffer;
  previous_hash: Buffer | null;
  previous_expires_at: Date | null;
  hosts: string[] | null;
  rate: string | null;
  sync: boolean;
  schedule: boolean;
  max_body_bytes: number | null;
  admin: AdminScope | null;
  kafka_entry: boolean;
  credentials: string[] | null;
  destinations: string[] | null;
  virtual_hosts: boolean;
  weight: number;
  max_in_flight: number;
  deadline: string | null;
  created_at: Date;
  rotated_at: Date | null;
  revoked_at: Date | null;
}

function recordOf(row: KeyRow): KeyRecord {
  return {
    id: row.id,
    name: row.name,
    secretHash: row.secret_hash,
    ...(row.previous_hash ? { previousHash: row.previous_hash } : {}),
    ...(row.previous_expires_at ? { previousExpiresAt: row.previous_expires_at } : {}),
    ...(row.hosts ? { hosts: row.hosts } : {}),
    ...(row.rate ? { rate: row.rate } : {}),
    sync: row.sync,
    schedule: row.schedule,
    ...(row.max_body_bytes === null ? {} : { maxBodyBytes: row.max_body_bytes }),
    ...(row.admin ? { admin: row.admin } : {}),
    kafkaEntry: row.kafka_entry,
    ...(row.credentials ? { credentials: row.credentials } : {}),
    ...(row.destinations ? { destinations: row.destinations } : {}),
    ...(row.virtual_hosts ? { virtualHosts: true } : {}),
    ...(row.weight === 1 ? {} : { weight: row.weight }),
    ...(row.max_in_flight > 0 ? { maxInFlight: row.max_in_flight } : {}),
    ...(row.deadline ? { deadline: row.deadline } : {}),
    createdAt: row.created_at,
    ...(row.rotated_at ? { rotatedAt: row.rotated_at } : {}),
    ...(row.revoked_at ? { revokedAt: row.revoked_at } : {}),
  };
}

/** The info of a record, without the hashes (what `keys list` prints). */
export function infoOf(record: KeyRecord): KeyInfo {
  const { secretHash: _s, previousHash: _p, ...info } = record;
  return info;
}

export interface CreateKey extends Partial<KeyScopes> {
  name: string;
}

/** A key as created or rotated: the token is shown this once and never stored. */
export interface IssuedKey {
  id: string;
  name: string;
  token: string;
}

/**
 * A fresh token, stored nowhere: what an operator puts in BOOTSTRAP_ADMIN_KEY
 * (`requester keys token`), adopted by KeyStore.adopt.
 */
export function mintToken(): string {
  return newToken(randomBytes(ID_BYTES).toString('hex')).token;
}

function newToken(id: string): { token: string; secret: string } {
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  return { token: `${TOKEN_PREFIX}${id}_${secret}`, secret };
}

/** The store of API keys in PostgreSQL (`sql` must be migrated: `Dependencies.sql()` is). */
export class KeyStore {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async create(spec: CreateKey): Promise<IssuedKey> {
    const name = checkKeyName(spec.name);
    const hosts = spec.hosts?.map(checkHostPattern);
    if (spec.rate !== undefined) parseRate(spec.rate);
    if (
      spec.maxBodyBytes !== undefined &&
      !(Number.isSafeInteger(spec.maxBodyBytes) && spec.maxBodyBytes > 0)
    )
      throw new ValidationError([{ path: 'maxBodyBytes', message: 'must be a whole number of bytes > 0' }]);
    if (spec.weight !== undefined) checkWeight(spec.weight);
    if (spec.maxInFlight !== undefined) checkMaxInFlight(spec.maxInFlight);
    if (spec.deadline !== undefined) checkDeadline(spec.deadline);
    if (spec.admin !== undefined && !ADMIN_SCOPES.includes(spec.admin))
      throw new ValidationError([{ path: 'admin', message: `must be ${ADMIN_SCOPES.join(' or ')}` }]);
    const credentials = spec.credentials?.map((c) => c.trim()).filter(Boolean);
    for (const credential of credentials ?? [])
      if (!CREDENTIAL_NAME_PATTERN.test(credential))
        throw new ValidationError([
          { path: 'credentials', message: `${JSON.stringify(credential)} is not a credential name` },
        ]);
    const destinations =
      spec.destinations === undefined ? undefined : checkDestinationNames(spec.destinations);
    const id = randomBytes(ID_BYTES).toString('hex');
    const { token, secret } = newToken(id);
    try {
      await this.#sql`insert into requester_api_keys
        (id, name, secret_hash, hosts, rate, sync, schedule, max_body_bytes, admin, kafka_entry, credentials,
         weight, max_in_flight, virtual_hosts, destinations, deadline)
        values (${id}, ${name}, ${hashSecret(secret)}, ${hosts ?? null}, ${spec.rate ?? null},
                ${spec.sync ?? false}, ${spec.schedule ?? false}, ${spec.maxBodyBytes ?? null},
                ${spec.admin ?? null}, ${spec.kafkaEntry ?? false}, ${credentials?.length ? credentials : null},
                ${spec.weight ?? 1}, ${spec.maxInFlight ?? 0}, ${spec.virtualHosts ?? false},
                ${destinations ?? null}, ${spec.deadline ?? null})`;
    } catch (err) {
      if ((err as { code?: string }).code === '23505')
        throw new ValidationError([{ path: 'name', message: `a live key named ${name} exists already` }]);
      throw err;
    }
    return { id, name, token };
  }

  /**
   * The first admin key, from a token the operator made and keeps in a secret store
   * (BOOTSTRAP_ADMIN_KEY, applied by `requester migrate`): its hash is stored, the token is never
   * printed. Once only: when a key of this name exists, live or revoked, nothing changes, so a
   * revoked bootstrap key stays revoked however often the migration runs again.
   * Returns the key's id when it was created now, undefined when the name was taken already.
   */
  async adopt(spec: CreateKey, token: string): Promise<string | undefined> {
    const name = checkKeyName(spec.name);
    const parsed = parseToken(token);
    // Never echo the token: the error names only the expected shape.
    if (!parsed)
      throw new ValidationError([
        { path: 'token', message: `is not ${TOKEN_PREFIX}<12 hex digits>_<43 base64url characters>` },
      ]);
    const rows = await this.#sql`insert into requester_api_keys (id, name, secret_hash, admin)
      select ${parsed.id}, ${name}, ${hashSecret(parsed.secret)}, ${spec.admin ?? null}
      where not exists (select 1 from requester_api_keys where name = ${name})
      on conflict do nothing
      returning id`;
    return rows[0]?.id as string | undefined;
  }

  /** Every key, newest first; revoked ones only with `all`. */
  async list(all = false): Promise<KeyInfo[]> {
    const rows = await this.#sql<KeyRow[]>`select * from requester_api_keys
      where ${all} or revoked_at is null order by created_at desc`;
    return rows.map((row) => infoOf(recordOf(row)));
  }

  /** The key with this id (revoked or not), or undefined. */
  async find(id: string): Promise<KeyRecord | undefined> {
    const [row] = await this.#sql<KeyRow[]>`select * from requester_api_keys where id = ${id}`;
    return row ? recordOf(row) : undefined;
  }

  /** Revokes the live key with this id or name; false when there is none. */
  async revoke(idOrName: string): Promise<boolean> {
    const rows = await this.#sql`update requester_api_keys set revoked_at = now()
      where (id = ${idOrName} or name = ${idOrName}) and revoked_at is null returning id`;
    return rows.length > 0;
  }

  /**
   * Allows (or withdraws) Kafka entry for the live key with this id or name: routers see the
   * change within AUTH_CACHE_TTL. False when there is no such key.
   */
  async setKafkaEntry(idOrName: string, allowed: boolean): Promise<boolean> {
    const rows = await this.#sql`update requester_api_keys set kafka_entry = ${allowed}
      where (id = ${idOrName} or name = ${idOrName}) and revoked_at is null returning id`;
    return rows.length > 0;
  }

  /**
   * Lets the live key with this id or name send its own `Host` headers (or withdraws it): ingresses
   * see the change within AUTH_CACHE_TTL. False when there is no such key.
   */
  async setVirtualHosts(idOrName: string, allowed: boolean): Promise<boolean> {
    const rows = await this.#sql`update requester_api_keys set virtual_hosts = ${allowed}
      where (id = ${idOrName} or name = ${idOrName}) and revoked_at is null returning id`;
    return rows.length > 0;
  }

  /**
   * Limits the live key with this id or name to `destinations` (an empty list: no limit, absolute
   * URIs again): ingresses see the change within AUTH_CACHE_TTL. False when there is no such key.
   */
  async setDestinations(idOrName: string, destinations: readonly string[]): Promise<boolean> {
    const names = checkDestinationNames(destinations);
    const rows = await this.#sql`update requester_api_keys set destinations = ${names.length ? names : null}
      where (id = ${idOrName} or name = ${idOrName}) and revoked_at is null returning id`;
    return rows.length > 0;
  }

  /**
   * Sets (or, undefined, removes) the default deadline of the live key with this id or name:
   * ingresses apply it within AUTH_CACHE_TTL. False when there is no such key.
   */
  async setDeadline(idOrName: string, deadline: string | undefined): Promise<boolean> {
    if (deadline !== undefined) checkDeadline(deadline);
    const rows = await this.#sql`update requester_api_keys set deadline = ${deadline ?? null}
      where (id = ${idOrName} or name = ${idOrName}) and revoked_at is null returning id`;
    return rows.length > 0;
  }

  /**
   * Sets the weight of the live key with this id or name; its name (the client whose weight the
   * queue must be given), or undefined when there is no such key.
   */
  async setWeight(idOrName: string, weight: number): Promise<string | undefined> {
    checkWeight(weight);
    const [row] = await this.#sql<Array<{ name: string }>>`update requester_api_keys set weight = ${weight}
      where (id = ${idOrName} or name = ${idOrName}) and revoked_at is null returning name`;
    return row?.name;
  }

  /**
   * Sets the cap of tasks in flight (0: none) of the live key with this id or name; its name (the
   * client the queue must be given the cap of), or undefined when there is no such key.
   */
  async setMaxInFlight(idOrName: string, maxInFlight: number): Promise<string | undefined> {
    checkMaxInFlight(maxInFlight);
    const [row] = await this.#sql<
      Array<{ name: string }>
    >`update requester_api_keys set max_in_flight = ${maxInFlight}
      where (id = ${idOrName} or name = ${idOrName}) and revoked_at is null returning name`;
    return row?.name;
  }

  /**
   * A new secret for the live key with this id or name (same id, name and scopes: its results
   * and rate stay its own); the old secret keeps working for `graceMs`. Undefined when no such key.
   */
  async rotate(idOrName: string, graceMs: number): Promise<IssuedKey | undefined> {
    return this.#sql.begin(async (tx) => {
      const [row] = await tx<KeyRow[]>`select * from requester_api_keys
        where (id = ${idOrName} or name = ${idOrName}) and revoked_at is null for update`;
      if (!row) return undefined;
      const { token, secret } = newToken(row.id);
      await tx`update requester_api_keys set
          previous_hash = secret_hash,
          previous_expires_at = now() + ${graceMs} * interval '1 millisecond',
          secret_hash = ${hashSecret(secret)},
          rotated_at = now()
        where id = ${row.id}`;
      return { id: row.id, name: row.name, token };
    }) as Promise<IssuedKey | undefined>;
  }
}

function checkDestinationNames(input: readonly string[]): string[] {
  const names = [...new Set(input.map((n) => n.trim()).filter(Boolean))];
  for (const name of names)
    if (!DESTINATION_NAME_PATTERN.test(name))
      throw new ValidationError([
        { path: 'destinations', message: `${JSON.stringify(name)} is not a destination name` },
      ]);
  return names;
}

function checkWeight(weight: number): void {
  if (!Number.isInteger(weight) || weight < 1 || weight > MAX_KEY_WEIGHT) {
    throw new ValidationError([
      { path: 'weight', message: `must be a whole number from 1 to ${MAX_KEY_WEIGHT}` },
    ]);
  }
}

function checkMaxInFlight(maxInFlight: number): void {
  if (!Number.isInteger(maxInFlight) || maxInFlight < 0 || maxInFlight > MAX_KEY_IN_FLIGHT) {
    throw new ValidationError([
      { path: 'maxInFlight', message: `must be a whole number from 0 (no cap) to ${MAX_KEY_IN_FLIGHT}` },
    ]);
  }
}

function checkDeadline(deadline: string): void {
  const problem = defaultDeadlineProblem(deadline);
  if (problem) throw new ValidationError([{ path: 'deadline', message: problem }]);
}
