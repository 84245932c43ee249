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
}

/** The one PostgreSQL pool (porsager/postgres). Statements are bounded by `statement_timeout`. */
export function createPg(settings: PgSettings): Sql {
  return postgres(settings.url, {
    max: settings.max ?? 10,
    idle_timeout: 30,
    connect_timeout: 5,
    onnotice: () => {},
    connection: {
      application_name: 'requester',
      statement_timeout: settings.statementTimeoutMs ?? 10_000,
      ...(settings.schema ? { search_path: settings.schema } : {}),
    },
  });
}

/** Creates the database named in `url` when it does not exist (connecting to `postgres`). */
export async function ensureDatabase(url: string): Promise<boolean> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, '')) || 'postgres';
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const sql = postgres(admin.toString(), { max: 1, connect_timeout: 5, onnotice: () => {} });
  try {
    const rows = await sql`select 1 from pg_database where datname = ${name}`;
    if (rows.length > 0) return false;
    await sql.unsafe(`create database "${name.replaceAll('"', '""')}"`).catch((err: { code?: string }) => {
      if (err.code !== '42P04') throw err; // created concurrently by another process
    });
    return true;
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
