import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../testing/fault-proxy.ts';
import { TEST_DATABASE_URL, uniqueName } from '../testing/index.ts';
import { eventually } from '../testing/server.ts';
import { createPg, ensureDatabase, type Sql } from './index.ts';

/**
 * A connection reset (PostgreSQL crashed, a proxy or a NAT cut the connection): postgres.js rejects
 * what was sent on the socket's `error` event, but the connection stays busy in its pool until the
 * `close` event, emitted once the handle has closed. A statement asked in between is queued as sent
 * on the dead socket, and unpatched 3.4.9 fails what is still queued at `close` only when the close
 * had no error: that statement never settled (patches/README.md, `postgres@3.4.9.patch`).
 */
describe('createPg: a statement asked while a reset connection closes', () => {
  let proxy: FaultProxy | undefined;
  const pools: Sql[] = [];
  afterEach(async () => {
    for (const sql of pools.splice(0)) await sql.end({ timeout: 1 });
    await proxy?.close();
    proxy = undefined;
  });

  it('settles, and the pool answers the statements after it', async () => {
    await ensureDatabase(TEST_DATABASE_URL);
    const direct = createPg({ url: TEST_DATABASE_URL, max: 1 });
    pools.push(direct);
    const target = new URL(TEST_DATABASE_URL);
    proxy = await startFaultProxy(`${target.hostname}:${target.port || 5432}`);
    const url = new URL(TEST_DATABASE_URL);
    url.host = proxy.address;
    // One connection, so that the statement asked in the window can only go to the reset one.
    const sql = createPg({ url: url.toString(), max: 1 });
    pools.push(sql);
    await sql`select 1`;

    // A: a statement still running on the server when the connection is reset. Its backend, which
    // does not notice its client gone while it sleeps, is ended once the test is done with it.
    const marker = uniqueName('stranded');
    let b: Promise<unknown> | undefined;
    const a = sql.unsafe(`select pg_sleep(60) -- ${marker}`).catch((err: unknown) => {
      // The socket's `error` event has rejected A; its `close` event has not come yet.
      b = sql`select 2 as b`;
      return err;
    });
    const running = () =>
      direct`select pid from pg_stat_activity where query like ${`%${marker}`} and pid <> pg_backend_pid()`;
    try {
      await eventually(async () => (await running()).length === 1, 15_000, 'statement A running');
      proxy.reset();
      expect(await a).toMatchObject({ code: 'ECONNRESET' });
      expect(b).toBeDefined();

      // B must settle: failed with the connection, or answered on a new one. The bound only tells a
      // hang from an answer (a healthy run settles B in milliseconds); it is not a speed to meet.
      const hang = new AbortController();
      const outcome = await Promise.race([
        (b as Promise<unknown>).then(
          (rows) => ({ answered: rows }),
          (err: unknown) => ({ failed: err }),
        ),
        sleep(15_000, { pending: true }, { signal: hang.signal }).catch(() => ({ pending: true })),
      ]);
      hang.abort();
      expect(outcome, 'statement B never settled').not.toHaveProperty('pending');
      if ('failed' in outcome)
        expect((outcome.failed as { code?: string }).code).toMatch(/^(CONNECTION_CLOSED|ECONNRESET)$/);
      else expect(outcome).toEqual({ answered: [{ b: 2 }] });

      // The pool goes on: statements after it are answered, each with its own result.
      expect(await sql`select 3 as c`).toEqual([{ c: 3 }]);
      expect(await sql`select 4 as d`).toEqual([{ d: 4 }]);
    } finally {
      await direct`select pg_terminate_backend(pid) from pg_stat_activity where query like ${`%${marker}`} and pid <> pg_backend_pid()`;
    }
  });
});
