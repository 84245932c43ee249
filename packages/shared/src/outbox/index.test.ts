import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPg, migrate } from '../pg/index.ts';
import {
  eventually,
  type FaultProxy,
  startFaultProxy,
  startPrivatePostgres,
  TEST_DATABASE_URL,
  testPg,
} from '../testing/index.ts';
import { type ClaimedRow, Outbox, type OutboxRow } from './index.ts';

const row = (id: string, dueInMs: number): OutboxRow => ({
  taskId: `${id}:0`,
  requestId: id,
  dueAt: new Date(Date.now() + dueInMs),
  topic: 'in',
  key: id,
  payload: Buffer.from(id),
});
const ids = (rows: ClaimedRow[]) => rows.map((r) => r.requestId);

describe('outbox: claim, deliver, delete', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  let outbox: Outbox;

  beforeAll(async () => {
    pg = await testPg();
    outbox = new Outbox(pg.sql);
  });
  afterAll(() => pg.drop());
  beforeEach(async () => {
    await pg.sql`delete from outbox`;
  });

  it('delivers the due rows in due order and deletes them; a row not yet due stays', async () => {
    await outbox.add([row('b', -1_000), row('later', 60_000), row('a', -2_000), row('c', -10)]);
    const seen: string[][] = [];
    expect(await outbox.deliverDue(10, async (rows) => void seen.push(ids(rows)))).toBe(3);
    expect(seen).toEqual([['a', 'b', 'c']]);
    expect(await outbox.count()).toBe(1);
    expect(await outbox.deliverDue(10, async () => {})).toBe(0);
  });

  it('stats: rows, rows due, and how long the earliest due one is overdue (0 when none is due)', async () => {
    expect(await outbox.backlog()).toEqual({ rows: 0, due: 0, oldestOverdueMs: 0 });
    await outbox.add([row('later', 60_000)]);
    expect(await outbox.backlog()).toEqual({ rows: 1, due: 0, oldestOverdueMs: 0 });
    await outbox.add([row('old', -90_000), row('recent', -1_000)]);
    const stats = await outbox.backlog();
    expect(stats).toMatchObject({ rows: 3, due: 2 });
    // PostgreSQL's clock against this process's: a few seconds of skew at most.
    expect(stats.oldestOverdueMs).toBeGreaterThan(80_000);
    expect(stats.oldestOverdueMs).toBeLessThan(100_000);
  });

  it('hides rows from other claimers while they are being delivered', async () => {
    await outbox.add([row('a', -10), row('b', -10)]);
    let meanwhile = -1;
    let countMeanwhile = -1;
    await outbox.deliverDue(10, async () => {
      meanwhile = await outbox.deliverDue(10, async () => {});
      countMeanwhile = await outbox.count();
    });
    expect(meanwhile).toBe(0);
    expect(countMeanwhile).toBe(2);
    expect(await outbox.count()).toBe(0);
  });

  it('hands the rows back, with their due time, when the delivery fails', async () => {
    const rows = [row('a', -5_000), row('b', -4_000)];
    await outbox.add(rows);
    await expect(
      outbox.deliverDue(10, async () => {
        throw new Error('broker says no');
      }),
    ).rejects.toThrow('broker says no');
    let again: ClaimedRow[] = [];
    const redelivered = await outbox.deliverDue(10, async (claimed) => {
      again = claimed;
    });
    expect(redelivered).toBe(2);
    expect(again.map((r) => r.dueAt.getTime())).toEqual(rows.map((r) => r.dueAt.getTime()));
  });

  it('stages ahead: claims rows due within aheadMs with their own due time, not later ones, and not again while leased', async () => {
    const rows = [row('soon', 20_000), row('now', -10), row('far', 600_000)];
    await outbox.add(rows);
    let claimed: ClaimedRow[] = [];
    let meanwhile = -1;
    const delivered = await outbox.deliverDue(
      10,
      async (taken) => {
        claimed = taken;
        // A lease shorter than the staging window: the claimed rows must stay hidden all the same.
        meanwhile = await outbox.deliverDue(10, async () => {}, 1_000, 60_000);
      },
      1_000,
      60_000,
    );
    expect(delivered).toBe(2);
    expect(meanwhile).toBe(0);
    expect(ids(claimed)).toEqual(['now', 'soon']);
    expect(claimed.map((r) => r.dueAt.getTime())).toEqual([
      rows[1]?.dueAt.getTime(),
      rows[0]?.dueAt.getTime(),
    ]);
    expect(await outbox.count()).toBe(1);
  });

  it('rows whose claimer vanished come back when the lease ends (delivered at least once)', async () => {
    await outbox.add([row('a', -10)]);
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const stuck = outbox.deliverDue(10, () => gate, 300);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await outbox.deliverDue(10, async () => {})).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 400));
    let again: ClaimedRow[] = [];
    const redelivered = await outbox.deliverDue(10, async (claimed) => {
      again = claimed;
    });
    expect(redelivered).toBe(1);
    expect(ids(again)).toEqual(['a']);
    release();
    expect(await stuck).toBe(1);
    expect(await outbox.count()).toBe(0);
  });
});

/**
 * The relays' turn across processes (takeTurn): one holder at a time per outbox, whatever pool
 * asks; a waiter past its bound fails naming the holder; another schema's outbox is another turn;
 * a turn statement that never answers ends its session (and the lock with it) at the deadline.
 */
describe('outbox: the relay turn', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  let other: Awaited<ReturnType<typeof testPg>>;
  /** A second "process" on pg's schema. */
  let second: ReturnType<typeof createPg>;
  let proxy: FaultProxy | undefined;
  let viaProxy: ReturnType<typeof createPg> | undefined;

  beforeAll(async () => {
    pg = await testPg();
    other = await testPg();
    second = createPg({ url: TEST_DATABASE_URL, max: 2, schema: pg.schema });
  });
  afterAll(async () => {
    await viaProxy?.end({ timeout: 1 });
    await proxy?.close();
    await second?.end({ timeout: 5 });
    await other?.drop();
    await pg?.drop();
  });

  it('is held by one outbox at a time; a wait past its bound fails naming the holder', async () => {
    const first = new Outbox(pg.sql);
    // Its waits for the lock end at 2 s on the server (half its deadline) and are asked again.
    const impatient = new Outbox(second, { turnDeadlineMs: 4_000 });
    const giveBack = await first.takeTurn(30_000);
    const [holder, ...others] = await first.turnSessions();
    expect(holder?.granted).toBe(true);
    expect(others).toEqual([]);
    // Several waits (2 s each) in a row before the bound (5 s): no error until then.
    await expect(impatient.takeTurn(5_000)).rejects.toThrow(
      new RegExp(`for the relay turn, held by PostgreSQL backend ${holder?.pid}$`),
    );
    // Another schema's outbox takes its own turn meanwhile.
    const elsewhere = new Outbox(other.sql);
    const givesBackElsewhere = await elsewhere.takeTurn(1_000);
    expect((await elsewhere.turnSessions()).map((s) => s.granted)).toEqual([true]);
    await givesBackElsewhere();
    await elsewhere.leaveTurns();
    await giveBack();
    const secondGivesBack = await impatient.takeTurn(1_000);
    await secondGivesBack();
    await first.leaveTurns();
    await impatient.leaveTurns();
  });

  it('a turn statement that never answers ends its session at the deadline, the lock with it', async () => {
    const target = new URL(TEST_DATABASE_URL);
    proxy = await startFaultProxy(`${target.hostname}:${target.port || 5432}`);
    const url = new URL(TEST_DATABASE_URL);
    url.host = proxy.address;
    viaProxy = createPg({ url: url.toString(), max: 2, schema: pg.schema });
    const outbox = new Outbox(viaProxy, { turnDeadlineMs: 1_000 });
    const direct = new Outbox(pg.sql);
    const giveBack = await outbox.takeTurn(30_000);
    expect((await direct.turnSessions()).map((s) => s.granted)).toEqual([true]);

    // Nothing passes either way: the unlock never answers. Giving back still returns (it never
    // throws), and ends the session, whose lock the server drops once the connection is gone.
    proxy.stall();
    await giveBack();
    await eventually(
      async () => (await direct.turnSessions()).length === 0,
      30_000,
      'the stalled session and its lock gone',
    );
    // A turn asked meanwhile fails at the deadline instead of waiting for ever.
    await expect(outbox.takeTurn(30_000)).rejects.toThrow(/did not settle within 1000 ms/);

    // Once PostgreSQL answers again, the turn is taken on a new session.
    proxy.heal();
    await eventually(
      () =>
        outbox.takeTurn(30_000).then(
          async (give) => {
            await give();
            return true;
          },
          () => false,
        ),
      30_000,
      'the turn taken again',
    );
    await outbox.leaveTurns();
  });
});

/**
 * PostgreSQL killed (kill -9) while a claimer holds rows: the claimer must neither take the process
 * down (postgres.js throws an uncatchable error for a statement on a transaction's lost connection,
 * which is why no transaction spans a delivery) nor lose the rows.
 */
describe('outbox: PostgreSQL killed during a delivery', () => {
  it('deletes the delivered rows once PostgreSQL is back', async () => {
    const server = await startPrivatePostgres();
    const sql = createPg({ url: `${server.url}/postgres`, max: 4 });
    try {
      await migrate(sql);
      const outbox = new Outbox(sql);
      await outbox.add([row('a', -10), row('b', -10), row('c', -10)]);
      let restarted: Promise<void> = Promise.resolve();
      const delivered = await outbox.deliverDue(10, async () => {
        await server.kill();
        restarted = new Promise((resolve) => setTimeout(resolve, 1_000)).then(() => server.restart());
      });
      await restarted;
      expect(delivered).toBe(3);
      expect(await outbox.count()).toBe(0);
    } finally {
      await sql.end({ timeout: 5 });
      await server.stop();
    }
  }, 60_000);
});
