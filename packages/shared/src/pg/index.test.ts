import { afterEach, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL, uniqueName } from '../testing/index.ts';
import { createPg, ensureDatabase, reconnectBackoff, type Sql } from './index.ts';

describe('createPg', () => {
  const pools: Sql[] = [];
  afterEach(async () => {
    for (const sql of pools.splice(0)) await sql.end({ timeout: 5 });
  });

  it('reads the array types on the first connection only, so a later one lost at once is no unhandled rejection', async () => {
    await ensureDatabase(TEST_DATABASE_URL);
    const sql = createPg({ url: TEST_DATABASE_URL, max: 4 });
    pools.push(sql);
    expect(sql.options.fetch_types).toBe(true);
    expect((await sql`select ${['a', 'b']}::text[] as xs`)[0]?.xs).toEqual(['a', 'b']);
    expect(sql.options.fetch_types).toBe(false);

    // Connections opened from now on fail their first statements (a 1 ms statement_timeout): the
    // same path as a connection PostgreSQL drops while it starts. postgres.js would lose the
    // failure of its own array-types query there as an unhandled rejection, killing the process.
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      (sql.options.connection as Record<string, unknown>).statement_timeout = 1;
      const results = await Promise.allSettled(
        [1, 2, 3, 4].map(() => sql`select pg_sleep(0.05), ${['a', 'b']}::text[] as xs`),
      );
      // Each call settles (cancelled by the 1 ms timeout, or answered by the first connection)…
      expect(results).toHaveLength(4);
      await new Promise((resolve) => setTimeout(resolve, 200));
      // …and nothing escapes.
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('retries a lost server within a second, not postgres.js’s 20 s', () => {
    for (let attempt = 0; attempt < 30; attempt++) {
      const seconds = reconnectBackoff(attempt);
      expect(seconds).toBeGreaterThan(0);
      expect(seconds).toBeLessThanOrEqual(1);
    }
    expect(reconnectBackoff(0)).toBeLessThanOrEqual(0.05);
  });
});

describe('ensureDatabase', () => {
  it('lets several processes create the same database at once: one creates it, none fails', async () => {
    // PostgreSQL answers two concurrent CREATE DATABASE of one name with a unique violation on
    // pg_database (23505), not only "already exists" (42P04): a fleet starting together met it.
    const admin = new URL(TEST_DATABASE_URL);
    admin.pathname = '/postgres';
    const sql = createPg({ url: admin.toString(), max: 1 });
    try {
      for (let round = 0; round < 5; round++) {
        const name = uniqueName('race').replaceAll('-', '_');
        const url = new URL(TEST_DATABASE_URL);
        url.pathname = `/${name}`;
        try {
          const created = await Promise.all(Array.from({ length: 6 }, () => ensureDatabase(url.toString())));
          expect(created.filter(Boolean)).toHaveLength(1);
          expect(await sql`select 1 from pg_database where datname = ${name}`).toHaveLength(1);
        } finally {
          await sql.unsafe(`drop database if exists "${name}"`);
        }
      }
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});
