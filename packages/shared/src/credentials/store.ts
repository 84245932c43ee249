import { randomBytes } from 'node:crypto';
import { CREDENTIAL_NAME_PATTERN } from '../contract/request.ts';
import { ValidationError } from '../errors/index.ts';
import type { Sql } from '../pg/index.ts';
import type { MasterKeys } from './master.ts';
import { parseCredentialOrigins } from './origins.ts';
import { open, type Sealed, seal, unwrap, wrap } from './seal.ts';
import { type CredentialSecrets, type CredentialSummary, parseCredentialSecrets, summaryOf } from './spec.ts';

/** A credential as it may be shown: no secret. */
export interface CredentialInfo {
  id: string;
  name: string;
  version: number;
  masterKeyId: string;
  summary: CredentialSummary;
  /** The origins (`scheme://host:port`) it may be sent to; undefined = none named yet (refused). */
  origins?: string[];
  createdAt: Date;
  rotatedAt?: Date;
  revokedAt?: Date;
}

/** A live credential opened for use (the executor): its secrets, and the version they are. */
export interface OpenedCredential {
  id: string;
  name: string;
  version: number;
  secrets: CredentialSecrets;
  /** Where it may be sent (see CredentialInfo.origins). */
  origins?: string[];
}

interface Row {
  id: string;
  name: string;
  version: number;
  data: Buffer;
  wrapped_key: Buffer;
  master_key_id: string;
  summary: CredentialSummary;
  origins: string[] | null;
  created_at: Date;
  rotated_at: Date | null;
  revoked_at: Date | null;
}

function infoOf(row: Row): CredentialInfo {
  return {
    id: row.id,
    name: row.name,
    version: row.version,
    masterKeyId: row.master_key_id,
    summary: row.summary,
    ...(row.origins?.length ? { origins: row.origins } : {}),
    createdAt: row.created_at,
    ...(row.rotated_at ? { rotatedAt: row.rotated_at } : {}),
    ...(row.revoked_at ? { revokedAt: row.revoked_at } : {}),
  };
}

export function checkCredentialName(name: string): string {
  if (!CREDENTIAL_NAME_PATTERN.test(name))
    throw new ValidationError([
      {
        path: 'name',
        message: "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
      },
    ]);
  return name;
}

/** The row's sealed bytes are bound to its id (the associated data). */
const aadOf = (id: string) => `credential:${id}`;

/**
 * The credential store in PostgreSQL (`requester_credentials`, migration 006). Writing and
 * opening need the master keys; listing does not.
 */
export class CredentialStore {
  readonly #sql: Sql;
  readonly #masters: MasterKeys | undefined;

  constructor(sql: Sql, masters: MasterKeys | undefined) {
    this.#sql = sql;
    this.#masters = masters;
  }

  #requireMasters(): MasterKeys {
    if (!this.#masters)
      throw new ValidationError([
        {
          path: 'CREDENTIALS_MASTER_KEY',
          message: 'credentials need a master key: set CREDENTIALS_MASTER_KEY or CREDENTIALS_MASTER_KEY_FILE',
        },
      ]);
    return this.#masters;
  }

  #seal(id: string, secrets: CredentialSecrets): Sealed {
    return seal(this.#requireMasters(), Buffer.from(JSON.stringify(secrets), 'utf8'), aadOf(id));
  }

  /**
   * A new credential, bound to `origins` (at least one: see ./origins.ts); null only where they
   * cannot be known (`credentials import-signing`): the credential is then refused everywhere
   * until an operator names them (setOrigins).
   */
  async create(
    name: string,
    input: unknown,
    origins: readonly string[] | string | null,
  ): Promise<CredentialInfo> {
    checkCredentialName(name);
    const secrets = parseCredentialSecrets(input);
    const bound = origins === null ? null : parseCredentialOrigins(origins);
    const id = randomBytes(6).toString('hex');
    const sealed = this.#seal(id, secrets);
    try {
      const [row] = await this.#sql<Row[]>`insert into requester_credentials
        (id, name, data, wrapped_key, master_key_id, summary, origins)
        values (${id}, ${name}, ${sealed.data}, ${sealed.wrappedKey}, ${sealed.masterKeyId},
                ${this.#sql.json(summaryOf(secrets) as never)}, ${bound})
        returning *`;
      return infoOf(row as Row);
    } catch (err) {
      if ((err as { code?: string }).code === '23505')
        throw new ValidationError([
          { path: 'name', message: `a live credential named ${name} exists already` },
        ]);
      throw err;
    }
  }

  /** Every credential, newest first; revoked ones only with `all`. */
  async list(all = false): Promise<CredentialInfo[]> {
    const rows = await this.#sql<Row[]>`select * from requester_credentials
      where ${all} or revoked_at is null order by created_at desc`;
    return rows.map(infoOf);
  }

  /** The names of the live credentials (the ingress checks `meta.credentials` against them). */
  async liveNames(): Promise<Set<string>> {
    return new Set((await this.liveOrigins()).keys());
  }

  /**
   * The live credentials by name, each with the origins it may be sent to (undefined: none named
   * yet): what the ingress checks `meta.credentials` and `meta.signing.keyId` against, without
   * opening a secret.
   */
  async liveOrigins(): Promise<Map<string, string[] | undefined>> {
    const rows = await this.#sql<
      { name: string; origins: string[] | null }[]
    >`select name, origins from requester_credentials where revoked_at is null`;
    return new Map(rows.map((r) => [r.name, r.origins?.length ? r.origins : undefined]));
  }

  /**
   * Names the origins the live credential `name` may be sent to, replacing those it had (the
   * upgrade of a credential created before origins existed, or a partner moving). Executors and
   * ingresses see it within CREDENTIALS_CACHE_TTL. Undefined when there is no such credential.
   */
  async setOrigins(name: string, origins: readonly string[] | string): Promise<CredentialInfo | undefined> {
    const bound = parseCredentialOrigins(origins);
    const [row] = await this.#sql<Row[]>`update requester_credentials set origins = ${bound}
      where name = ${name} and revoked_at is null returning *`;
    return row ? infoOf(row) : undefined;
  }

  /**
   * The live credential named `name`, opened; undefined when there is none (never created, or
   * revoked: `revoked` then says so).
   */
  async open(name: string): Promise<{ credential?: OpenedCredential; revoked: boolean }> {
    const rows = await this.#sql<Row[]>`select * from requester_credentials where name = ${name}
      order by revoked_at is null desc, created_at desc limit 1`;
    const row = rows[0];
    if (!row) return { revoked: false };
    if (row.revoked_at) return { revoked: true };
    const plain = open(this.#requireMasters(), sealedOf(row), aadOf(row.id));
    const secrets = parseCredentialSecrets(JSON.parse(plain.toString('utf8')));
    plain.fill(0);
    const credential: OpenedCredential = { id: row.id, name: row.name, version: row.version, secrets };
    if (row.origins?.length) credential.origins = row.origins;
    return { credential, revoked: false };
  }

  /**
   * New secrets for the live credential `name` (a new data key too); its version grows, so the
   * executors drop its cached token and connections. Undefined when there is no such credential.
   */
  async rotate(name: string, input: unknown): Promise<CredentialInfo | undefined> {
    const secrets = parseCredentialSecrets(input);
    return this.#sql.begin(async (tx) => {
      const [row] = await tx<Row[]>`select * from requester_credentials
        where name = ${name} and revoked_at is null for update`;
      if (!row) return undefined;
      const sealed = this.#seal(row.id, secrets);
      const [updated] = await tx<Row[]>`update requester_credentials set
          data = ${sealed.data}, wrapped_key = ${sealed.wrappedKey}, master_key_id = ${sealed.masterKeyId},
          summary = ${tx.json(summaryOf(secrets) as never)}, version = version + 1, rotated_at = now()
        where id = ${row.id} returning *`;
      return infoOf(updated as Row);
    }) as Promise<CredentialInfo | undefined>;
  }

  /** Revokes the live credential `name`; false when there is none. */
  async revoke(name: string): Promise<boolean> {
    const rows = await this.#sql`update requester_credentials set revoked_at = now()
      where name = ${name} and revoked_at is null returning id`;
    return rows.length > 0;
  }

  /**
   * Master key rotation: re-wraps every data key not yet wrapped by the current master key (the
   * secrets themselves are not re-encrypted). Row by row, each in its own short transaction, so
   * readers never wait: a row is readable before and after with either key held. Returns the
   * number of rows re-wrapped.
   */
  async rewrap(): Promise<number> {
    const masters = this.#requireMasters();
    const rows = await this.#sql<Row[]>`select id from requester_credentials
      where master_key_id <> ${masters.currentId}`;
    let done = 0;
    for (const { id } of rows) {
      await this.#sql.begin(async (tx) => {
        const [row] = await tx<Row[]>`select * from requester_credentials where id = ${id} for update`;
        if (!row || row.master_key_id === masters.currentId) return;
        const dataKey = unwrap(masters, sealedOf(row), aadOf(id));
        try {
          await tx`update requester_credentials set wrapped_key = ${wrap(masters, dataKey, aadOf(id))},
            master_key_id = ${masters.currentId} where id = ${id}`;
        } finally {
          dataKey.fill(0);
        }
        done++;
      });
    }
    return done;
  }
}

function sealedOf(row: Row): Sealed {
  return { data: row.data, wrappedKey: row.wrapped_key, masterKeyId: row.master_key_id };
}
