import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPg, migrate } from '../pg/index.ts';
import { startPrivatePostgres, testPg } from '../testing/index.ts';
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
