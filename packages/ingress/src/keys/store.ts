import { CREDENTIAL_NAME_PATTERN } from '@requester/shared/contract';
import { ValidationError } from '@requester/shared/errors';
import type { Sql } from '@requester/shared/pg';
import {
  checkDeadline,
  checkDestinationNames,
  checkHostPattern,
  checkKeyName,
  checkMaxInFlight,
  checkWeight,
  parseRate,
} from './checks.ts';
import { hashSecret, newKeyId, newToken, parseToken, TOKEN_PREFIX } from './token.ts';
import {
  ADMIN_SCOPES,
  type AdminScope,
  type CreateKey,
  type IssuedKey,
  type KeyInfo,
  type KeyRecord,
} from './types.ts';

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
    const id = newKeyId();
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
