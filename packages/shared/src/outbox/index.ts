import type { Sql } from '../pg/index.ts';

/**
 * The PostgreSQL outbox: tasks due later than the Redis horizon wait here with their full payload
 * (DESIGN.md §2). The router (and, for long backoffs, the executor) add rows; the relay claims due
 * rows with FOR UPDATE SKIP LOCKED, produces them to Kafka `in`, and deletes them in the same
 * transaction — only after the broker acknowledged them.
 */
export interface OutboxRow {
  /** `requestId:tryCount`: a second add of the same task is ignored. */
  taskId: string;
  requestId: string;
  dueAt: Date;
  topic: string;
  key: string | null;
  payload: Buffer;
}

export interface ClaimedRow extends OutboxRow {
  id: string;
}

/** NOTIFY channel: the payload is the earliest due time (epoch ms) of the rows just added. */
export const OUTBOX_CHANNEL = 'requester_outbox';

export class Outbox {
  private readonly sql: Sql;

  constructor(sql: Sql) {
    this.sql = sql;
  }

  /** Inserts rows (one statement), ignoring tasks already present, and wakes the relays. */
  async add(rows: OutboxRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    const records = rows.map((r) => ({
      task_id: r.taskId,
      request_id: r.requestId,
      due_at: r.dueAt,
      topic: r.topic,
      kafka_key: r.key,
      payload: r.payload,
    }));
    const inserted = await this.sql`
      insert into outbox ${this.sql(records, 'task_id', 'request_id', 'due_at', 'topic', 'kafka_key', 'payload')}
      on conflict (task_id) do nothing
      returning id`;
    const earliest = Math.min(...rows.map((r) => r.dueAt.getTime()));
    await this.sql`select pg_notify(${OUTBOX_CHANNEL}, ${String(earliest)})`;
    return inserted.length;
  }

  /**
   * Claims up to `limit` due rows, hands them to `deliver`, and deletes them when it resolves — all
   * in one transaction, so a crash or a failed delivery leaves the rows for the next claim.
   * Returns how many rows were delivered.
   */
  async deliverDue(limit: number, deliver: (rows: ClaimedRow[]) => Promise<void>): Promise<number> {
    return this.sql.begin(async (tx) => {
      const rows = await tx`
        select id, task_id, request_id, due_at, topic, kafka_key, payload
        from outbox where due_at <= now()
        order by due_at, id
        limit ${limit}
        for update skip locked`;
      if (rows.length === 0) return 0;
      const claimed: ClaimedRow[] = rows.map((r) => ({
        id: String(r.id),
        taskId: r.task_id as string,
        requestId: r.request_id as string,
        dueAt: r.due_at as Date,
        topic: r.topic as string,
        key: r.kafka_key as string | null,
        payload: r.payload as Buffer,
      }));
      await deliver(claimed);
      await tx`delete from outbox where id = any(${claimed.map((r) => r.id)}::bigint[])`;
      return claimed.length;
    });
  }

  /** Epoch ms of the earliest row, or undefined when the outbox is empty. */
  async nextDueAt(): Promise<number | undefined> {
    const [row] = await this.sql`select extract(epoch from min(due_at)) * 1000 as due from outbox`;
    return row?.due == null ? undefined : Number(row.due);
  }

  async count(): Promise<number> {
    const [row] = await this.sql`select count(*)::int as n from outbox`;
    return (row?.n as number) ?? 0;
  }

  /** Calls `onAdded(earliestDueMs)` whenever rows are added anywhere; returns an unlisten function. */
  async listen(onAdded: (earliestDueMs: number) => void): Promise<() => Promise<void>> {
    const { unlisten } = await this.sql.listen(OUTBOX_CHANNEL, (payload) => onAdded(Number(payload)));
    return unlisten;
  }
}
