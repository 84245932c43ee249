import { randomBytes } from 'node:crypto';
import { hashSecret, KeyStore, parseToken, secretHashAccepted } from '@requester/ingress';
import type { Sql } from '@requester/shared';
import type { Operator } from './operator.ts';

/** 256 random bits, base64url: what the session cookie holds. */
const SESSION_ID_BYTES = 32;
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

/**
 * The operator UI's sessions (migration 004, `requester_admin_sessions`). Logging in with an admin
 * API key opens one: the cookie then holds a random session id — never the key — of which only
 * the SHA-256 is stored. A session is checked against PostgreSQL on every request (no cache:
 * the UI's traffic is a few requests a second at most), so it ends at once when it expires
 * (ADMIN_SESSION_TTL), at logout (its row is deleted), when its key is revoked or loses its admin
 * scope, and when the secret it was opened with is rotated away (past the rotation's grace).
 */
export class AdminSessions {
  readonly #sql: () => Promise<Sql>;
  readonly #ttlMs: number;

  constructor(sql: () => Promise<Sql>, ttlMs: number) {
    this.#sql = sql;
    this.#ttlMs = ttlMs;
  }

  get ttlMs(): number {
    return this.#ttlMs;
  }

  /**
   * Opens a session for the key of `token`, which the caller has just identified as an admin
   * key; returns the session id (for the cookie). Sessions past their expiry are swept here.
   */
  async open(token: string): Promise<string> {
    const key = parseToken(token);
    if (!key) throw new Error('not an API key token');
    const id = randomBytes(SESSION_ID_BYTES).toString('base64url');
    const sql = await this.#sql();
    await sql`delete from requester_admin_sessions where expires_at < now()`;
    await sql`insert into requester_admin_sessions (id_hash, key_id, key_hash, expires_at)
      values (${hashSecret(id)}, ${key.id}, ${hashSecret(key.secret)},
              now() + ${this.#ttlMs} * interval '1 millisecond')`;
    return id;
  }

  /** The operator of a live session, or undefined (unknown, expired, logged out, key revoked…). */
  async operator(id: string | undefined): Promise<Operator | undefined> {
    if (!id || !SESSION_ID.test(id)) return undefined;
    const sql = await this.#sql();
    const [session] = await sql<Array<{ key_id: string; key_hash: Buffer }>>`
      select key_id, key_hash from requester_admin_sessions
      where id_hash = ${hashSecret(id)} and expires_at > now()`;
    if (!session) return undefined;
    const key = await new KeyStore(sql).find(session.key_id);
    if (!key || key.revokedAt || !key.admin || !secretHashAccepted(key, session.key_hash)) return undefined;
    return { name: key.name, admin: key.admin };
  }

  /** Ends a session (logout); an unknown id is nothing to end. */
  async close(id: string | undefined): Promise<void> {
    if (!id || !SESSION_ID.test(id)) return;
    const sql = await this.#sql();
    await sql`delete from requester_admin_sessions where id_hash = ${hashSecret(id)}`;
  }
}
