import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import postgres from 'postgres';
import type { Logger } from '../log/index.ts';

export type Sql = postgres.Sql;

export interface PgSettings {
  url: string;
  max?: number;
  statementTimeoutMs?: number;
  /** Search path schema, e.g. a per-test schema; created by `migrate`. */
  schema?: string;
  /**
   * Connections are closed only by failures, never on the pool's own (idle timeout, lifetime): for
   * session state such as an advisory lock, which a connection closed under it would drop. The
   * server drops a connection whose client vanished within about 25 s (TCP keepalive).
   */
  keepSessions?: boolean;
}

const settingsOfPool = new WeakMap<Sql, PgSettings>();

/** The one PostgreSQL pool (porsager/postgres). Statements are bounded by `statement_timeout`. */
export function createPg(settings: PgSettings): Sql {
  const sql = postgres(settings.url, {
    max: settings.max ?? 10,
    idle_timeout: settings.keepSessions ? 0 : 30,
    ...(settings.keepSessions ? { max_lifetime: 0 } : {}),
    connect_timeout: 5,
    backoff: reconnectBackoff,
    onnotice: () => {},
    connection: {
      application_name: 'requester',
      statement_timeout: settings.statementTimeoutMs ?? 10_000,
      ...(settings.schema ? { search_path: settings.schema } : {}),
      // A client that vanished without closing its connection (its machine lost, a partition)
      // would keep its session, and the session's locks, until the kernel's keepalive gives up
      // (hours): the server probes an idle connection after 10 s, and drops it 3 × 5 s later.
      ...(settings.keepSessions
        ? { tcp_keepalives_idle: 10, tcp_keepalives_interval: 5, tcp_keepalives_count: 3 }
        : {}),
    },
  });
  fetchTypesOnce(sql);
  settingsOfPool.set(sql, settings);
  return sql;
}

/**
 * A one-connection pool to the same database as `sql` (a pool of createPg) that keeps its session
 * (`keepSessions`), for a session lock; `statementTimeoutMs` replaces the pool's own. Not a
 * reserved connection of `sql`: postgres.js (3.4.9) hands a reserved connection that PostgreSQL
 * closed back to its pool, and the handle's next statement writes to the closed socket, an
 * uncaught TypeError that kills the process; a pool opens a new connection instead.
 */
export function sessionPg(sql: Sql, statementTimeoutMs?: number): Sql {
  const settings = settingsOfPool.get(sql);
  if (!settings) throw new Error('sessionPg: not a pool of createPg');
  return createPg({
    ...settings,
    max: 1,
    keepSessions: true,
    ...(statementTimeoutMs === undefined ? {} : { statementTimeoutMs }),
  });
}

/**
 * Seconds before the pool reconnects after `attempt` failed connects in a row. postgres.js's
 * default grows 3^attempt up to 20 s, so after a few seconds of PostgreSQL being down a restarted
 * server went unused for up to 20 s — the outbox stalled that long. Doubling from 50 ms, capped at
 * 1 s (jittered), costs a down server one refused connect per second per pool.
 */
export function reconnectBackoff(attempt: number): number {
  return Math.min(0.05 * 2 ** attempt, 1) * (0.5 + Math.random() / 2);
}

/**
 * postgres.js (3.4.9) reads the server's array types (fetch_types) as the first statement of
 * every new connection, and when that connection is lost meanwhile — PostgreSQL restarting while
 * the pool opens or reopens connections — the failure surfaces as an unhandled rejection, which
 * kills the process (porsager/postgres#1192, #1223). Requester uses built-in types only, whose
 * array types are the same on every connection: fetch them on the pool's first connection only,
 * and let later connections (reconnects after a restart included) reuse what the pool registered.
 * postgres.js reads `options.fetch_types` at each connect; if a later version stops doing so or
 * keeps no `shared.typeArrayMap`, this getter is simply not consulted or stays true (the default).
 */
function fetchTypesOnce(sql: Sql): void {
  const options = sql.options as Sql['options'] & { shared?: { typeArrayMap?: object } };
  Object.defineProperty(options, 'fetch_types', {
    configurable: true,
    enumerable: true,
    get: () => Object.keys(options.shared?.typeArrayMap ?? {}).length === 0,
  });
}

/**
 * What a PostgreSQL error means for the operator when the server refused our credentials or our
 * TLS settings (its messages name the user, never the password).
 */
export function explainPgError(err: unknown): string | undefined {
  const { code, message } = err as { code?: string; message?: string };
  if (code === '28P01' || code === '28000')
    return `PostgreSQL refused the credentials in DATABASE_URL: ${message}`;
  if (/\bSSL\b/i.test(message ?? '') && (err as { name?: string }).name !== 'PostgresError')
    return `PostgreSQL TLS failed (DATABASE_URL sslmode): ${message}`;
  return undefined;
}

/**
 * Creates the database named in `url` when it does not exist (connecting to `postgres`). Safe to
 * race: processes that start together may all find it missing, and PostgreSQL refuses all but one
 * CREATE DATABASE with "already exists" (42P04) or, when they meet inside the catalog, a unique
 * violation on pg_database (23505); both mean another process created it.
 */
export async function ensureDatabase(url: string): Promise<boolean> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, '')) || 'postgres';
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const sql = postgres(admin.toString(), { max: 1, connect_timeout: 5, onnotice: () => {} });
  try {
    const rows = await sql`select 1 from pg_database where datname = ${name}`;
    if (rows.length > 0) return false;
    try {
      await sql.unsafe(`create database "${name.replaceAll('"', '""')}"`);
      return true;
    } catch (err) {
      const { code } = err as { code?: string };
      if (code === '42P04' || code === '23505') return false;
      throw err;
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const MIGRATIONS_DIR = path.join(import.meta.dirname, 'migrations');

/**
 * Applies the versioned migrations in `pg/migrations` (NNN-name.sql, in order) that are not yet
 * recorded in `requester_migrations`. Several processes may start at once: an advisory lock makes
 * them take turns, and each migration runs in its own transaction.
 */
export async function migrate(sql: Sql, logger?: Logger, schema?: string): Promise<string[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d{3}-.+\.sql$/.test(f)).sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(7263615)`;
    if (schema) {
      await tx.unsafe(`create schema if not exists "${schema}"`);
      await tx.unsafe(`set local search_path to "${schema}"`);
    }
    await tx`create table if not exists requester_migrations (
      version text primary key, applied_at timestamptz not null default now())`;
    const done = new Set(
      (await tx`select version from requester_migrations`).map((r) => r.version as string),
    );
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(await readFile(path.join(MIGRATIONS_DIR, file), 'utf8'));
      await tx`insert into requester_migrations (version) values (${file})`;
      applied.push(file);
      logger?.info({ migration: file }, 'applied migration');
    }
  });
  return applied;
}
