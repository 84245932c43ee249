import type { MasterKeys } from '../credentials/master.ts';
import { open, type Sealed, seal } from '../credentials/seal.ts';
import { RequesterError, ValidationError } from '../errors/index.ts';
import type { Sql } from '../pg/index.ts';
import type { Destination } from './resolve.ts';
import {
  checkDestinationName,
  type DestinationSpec,
  destinationOrigin,
  parseDestinationInput,
} from './spec.ts';

/** A version of a destination as shown to operators. */
export interface DestinationInfo extends Destination {
  createdAt: Date;
  createdBy?: string;
}

interface Row {
  name: string;
  version: number;
  spec: DestinationSpec;
  secret_data: Buffer | null;
  secret_wrapped_key: Buffer | null;
  secret_master_key_id: string | null;
  created_at: Date;
  created_by: string | null;
}

/** The sealed secret headers of a row, bound to the destination's name (kept across its versions). */
const aadOf = (name: string) => `destination:${name}`;

function sealedOf(row: Row): Sealed | undefined {
  if (!row.secret_data || !row.secret_wrapped_key || !row.secret_master_key_id) return undefined;
  return { data: row.secret_data, wrappedKey: row.secret_wrapped_key, masterKeyId: row.secret_master_key_id };
}

const infoOf = (row: Row): DestinationInfo => ({
  name: row.name,
  version: row.version,
  spec: row.spec,
  createdAt: row.created_at,
  ...(row.created_by ? { createdBy: row.created_by } : {}),
});

/** Where a destination's credential may be sent, read without opening a secret. */
export type CredentialOrigins = (name: string) => Promise<readonly string[] | undefined | null>;

/**
 * The destinations in PostgreSQL (`requester_destinations`, migration 010). Every create or
 * update writes a new version; a delete marks every version of the name, and a later create of
 * the name goes on from its last version (a version number never names two specs).
 */
export class DestinationStore {
  readonly #sql: Sql;
  readonly #credentialOrigins: CredentialOrigins | undefined;
  readonly #masters: MasterKeys | undefined;

  /**
   * `credentialOrigins`: the origins of a live credential (undefined: none named yet, null: no
   * such credential), to refuse a destination whose credential is not bound to its origin.
   * `masters`: to seal secret headers (writing them) and open them (the executor); listing and
   * every other change need none.
   */
  constructor(sql: Sql, credentialOrigins?: CredentialOrigins, masters?: MasterKeys) {
    this.#sql = sql;
    this.#credentialOrigins = credentialOrigins;
    this.#masters = masters;
  }

  /** A new destination; a ValidationError when a live one has the name. */
  async create(name: string, input: unknown, actor?: string): Promise<DestinationInfo> {
    checkDestinationName(name);
    const { spec, secretHeaders } = parseDestinationInput(input);
    await this.#check(spec);
    return this.#write(name, spec, this.#sealHeaders(name, spec, secretHeaders), actor, 'create');
  }

  /**
   * A new version of the live destination `name`: `input` replaces the spec, or with `merge`, is
   * laid over it field by field. Its secret headers are kept unless `input` names
   * `secretHeaders` (`{}` drops them). Undefined when there is no such destination.
   */
  async update(
    name: string,
    input: unknown,
    actor?: string,
    merge = false,
  ): Promise<DestinationInfo | undefined> {
    const [current] = await this.#sql<Row[]>`select * from requester_destinations
      where name = ${name} and deleted_at is null order by version desc limit 1`;
    if (!current) return undefined;
    const { secretHeaderNames, ...kept } = current.spec;
    const next = merge ? { ...kept, ...(input as object) } : input;
    const { spec, secretHeaders } = parseDestinationInput(next);
    await this.#check(spec);
    const given = typeof input === 'object' && input !== null && 'secretHeaders' in input;
    if (!given && secretHeaderNames) spec.secretHeaderNames = secretHeaderNames;
    const sealed = given ? this.#sealHeaders(name, spec, secretHeaders) : sealedOf(current);
    return this.#write(name, spec, sealed, actor, 'update');
  }

  /** Seals `headers` for `name`, naming them in `spec` (undefined: none). */
  #sealHeaders(
    name: string,
    spec: DestinationSpec,
    headers: Record<string, string> | undefined,
  ): Sealed | undefined {
    if (!headers || Object.keys(headers).length === 0) return undefined;
    spec.secretHeaderNames = Object.keys(headers);
    if (!this.#masters)
      throw new ValidationError([
        {
          path: 'secretHeaders',
          message:
            'secret headers need a master key: set CREDENTIALS_MASTER_KEY or CREDENTIALS_MASTER_KEY_FILE',
        },
      ]);
    return seal(this.#masters, Buffer.from(JSON.stringify(headers), 'utf8'), aadOf(name));
  }

  async #check(spec: DestinationSpec): Promise<DestinationSpec> {
    if (spec.credentials === undefined) return spec;
    const origins = await this.#credentialOrigins?.(spec.credentials);
    if (origins === null)
      throw new ValidationError([
        {
          path: 'credentials',
          message: `no live credential named ${spec.credentials} (requester credentials list)`,
        },
      ]);
    const origin = destinationOrigin(spec);
    if (this.#credentialOrigins && !origins?.includes(origin))
      throw new ValidationError([
        {
          path: 'credentials',
          message: `credential ${spec.credentials} is not bound to ${origin} (requester credentials set-origins ${spec.credentials} --origins …)`,
        },
      ]);
    return spec;
  }

  async #write(
    name: string,
    spec: DestinationSpec,
    sealed: Sealed | undefined,
    actor: string | undefined,
    how: 'create' | 'update',
  ) {
    return this.#sql.begin(async (tx) => {
      // One writer per name at a time: two updates never take the same version.
      await tx`select pg_advisory_xact_lock(hashtext(${`requester_destinations:${name}`}))`;
      const [last] = await tx<{ version: number; deleted_at: Date | null }[]>`select version, deleted_at
        from requester_destinations where name = ${name} order by version desc limit 1`;
      const live = last !== undefined && last.deleted_at === null;
      if (how === 'create' && live)
        throw new ValidationError([{ path: 'name', message: `a destination named ${name} exists already` }]);
      if (how === 'update' && !live) return undefined;
      const [row] = await tx<Row[]>`insert into requester_destinations
          (name, version, spec, secret_data, secret_wrapped_key, secret_master_key_id, created_by)
        values (${name}, ${(last?.version ?? 0) + 1}, ${tx.json(spec as never)}, ${sealed?.data ?? null},
                ${sealed?.wrappedKey ?? null}, ${sealed?.masterKeyId ?? null}, ${actor ?? null})
        returning *`;
      return infoOf(row as Row);
    }) as Promise<DestinationInfo>;
  }

  /**
   * The current version of the live destination `name` with its secret headers opened (the
   * executor's read); undefined when there is none. A RequesterError `invalid_config` when it has
   * secret headers and no master key here opens them.
   */
  async open(name: string): Promise<Destination | undefined> {
    const [row] = await this.#sql<Row[]>`select * from requester_destinations
      where name = ${name} and deleted_at is null order by version desc limit 1`;
    if (!row) return undefined;
    const destination: Destination = { name: row.name, version: row.version, spec: row.spec };
    const sealed = sealedOf(row);
    if (!sealed) return destination;
    if (!this.#masters)
      throw new RequesterError(
        'invalid_config',
        `destination ${name} has secret headers: this executor needs CREDENTIALS_MASTER_KEY to send them`,
      );
    const plain = open(this.#masters, sealed, aadOf(row.name));
    destination.secretHeaders = JSON.parse(plain.toString('utf8')) as Record<string, string>;
    plain.fill(0);
    return destination;
  }

  /** The current version of the live destination `name`; undefined when there is none. */
  async get(name: string): Promise<DestinationInfo | undefined> {
    const [row] = await this.#sql<Row[]>`select * from requester_destinations
      where name = ${name} and deleted_at is null order by version desc limit 1`;
    return row ? infoOf(row) : undefined;
  }

  /** Every version of `name`, newest first (deleted ones included). */
  async history(name: string): Promise<DestinationInfo[]> {
    const rows = await this.#sql<Row[]>`select * from requester_destinations
      where name = ${name} order by version desc`;
    return rows.map(infoOf);
  }

  /** The live destinations, each at its current version, by name. */
  async list(): Promise<DestinationInfo[]> {
    const rows = await this.#sql<Row[]>`select distinct on (name) * from requester_destinations
      where deleted_at is null order by name, version desc`;
    return rows.map(infoOf);
  }

  /** Deletes the live destination `name` (its requests are refused from then on); false when there is none. */
  async delete(name: string): Promise<boolean> {
    const rows = await this.#sql`update requester_destinations set deleted_at = now()
      where name = ${name} and deleted_at is null returning version`;
    return rows.length > 0;
  }
}

/**
 * The current version of each destination, read from the store at most once per `ttlMs` per
 * name and process: what the ingress and the executor resolve requests against. A change is in
 * force everywhere within `ttlMs` (CREDENTIALS_CACHE_TTL, like the credentials').
 */
export class DestinationCatalog {
  readonly #load: (name: string) => Promise<Destination | undefined>;
  readonly #ttlMs: number;
  readonly #cached = new Map<string, { at: number; found: Promise<Destination | undefined> }>();

  constructor(load: (name: string) => Promise<Destination | undefined>, ttlMs: number) {
    this.#load = load;
    this.#ttlMs = ttlMs;
  }

  /** The destination `name` (undefined: none); rejects when the store does not answer. */
  current(name: string): Promise<Destination | undefined> {
    const now = Date.now();
    const hit = this.#cached.get(name);
    if (hit && now - hit.at < this.#ttlMs) return hit.found;
    if (this.#cached.size >= 10_000) this.#cached.clear();
    const found = this.#load(name);
    this.#cached.set(name, { at: now, found });
    // A failed read is not kept: the next call asks again.
    found.catch(() => this.#cached.delete(name));
    return found;
  }
}
