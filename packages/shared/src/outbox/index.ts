import { CLIENT_SCOPE_SEPARATOR } from '../contract/namespace.ts';
import type { Sql } from '../pg/index.ts';
import { RelayTurn, type TurnSession } from './turn.ts';

export { DEFAULT_TURN_DEADLINE_MS, RelayTurn, type TurnSession } from './turn.ts';

/**
 * The PostgreSQL outbox: tasks due later than the Redis horizon wait here with their full payload
 * (docs/architecture.md §2). The router (and, for long backoffs, the executor) add rows; the relay claims due
 * rows with FOR UPDATE SKIP LOCKED (a lease), produces them to Kafka `in`, and deletes them only
 * after the broker acknowledged them.
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

/** Epoch ms at the database's clock; null when no row qualifies. */
export interface OutboxStats {
  rows: number;
  overdue: number;
  oldestDueAt: number | null;
  nextDueAt: number | null;
  lastDueAt: number | null;
  payloadBytes: number;
  /** The database's clock when counted (for "overdue by" and "due in"). */
  nowMs: number;
}

/** Which rows a list or a bulk action takes: by client (null: none) and due window (epoch ms). */
export interface WaitingFilter {
  client?: string | null;
  dueAfter?: number;
  dueBefore?: number;
  /** The request's `meta.partition` (as its client named it). */
  partition?: string;
  /** Rows added before (epoch ms): an age filter. */
  addedBefore?: number;
}

/** A row of the outbox as the task lists show it (Outbox.page). */
export interface WaitingRow {
  taskId: string;
  requestId: string;
  client: string | null;
  /** Epoch ms. */
  dueAt: number;
  addedAt: number;
  /** The request's URL (callers redact it); null for a row that holds none. */
  uri: string | null;
  partition: string | null;
  /** `meta.deadline`, the instant the request's door resolved it to; null without one. */
  deadline: string | null;
  /** Its `meta.debounce` key (a burst ending beyond the horizon waits here); null without one. */
  debounce: string | null;
  /** Its `meta.concurrency` (at most `limit` calls of `key` in flight); null without one. */
  concurrency: { key: string; limit: number } | null;
}

/** `<due_at with microseconds>~<id>`: the position after the last row of a page. */
function parseCursor(text: string): { due: string; id: string } {
  const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)~(\d+)$/.exec(text);
  if (!match) throw new RangeError(`not a cursor of the outbox: ${JSON.stringify(text)}`);
  return { due: match[1] as string, id: match[2] as string };
}

export interface ClaimedRow extends OutboxRow {
  id: string;
}

/** How long claimed rows stay invisible to other claimers by default (see deliverDue). */
export const DEFAULT_LEASE_MS = 30_000;

/** How long deliverDue retries deleting rows it delivered (PostgreSQL restarting), within the lease. */
const DELETE_RETRY_MS = 10_000;

/** NOTIFY channel: the payload is the earliest due time (epoch ms) of the rows just added. */
export const OUTBOX_CHANNEL = 'requester_outbox';

export class Outbox {
  private readonly sql: Sql;
  readonly #turn: RelayTurn;

  /** `turnDeadlineMs`: the client's bound on each statement of the relay turn's session (RelayTurn). */
  constructor(sql: Sql, options: { turnDeadlineMs?: number } = {}) {
    this.sql = sql;
    this.#turn = new RelayTurn(sql, options.turnDeadlineMs);
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
   * Takes the relays' turn to claim and produce across processes (RelayTurn.take): resolves to the
   * function that gives it back. Claims that take turns reach `in` in claim order, which is due
   * order, so an ordered partition's rows spread over the claims of two relays keep their order.
   */
  takeTurn(maxWaitMs: number): Promise<() => Promise<void>> {
    return this.#turn.take(maxWaitMs);
  }

  /** Closes the turn's session (a stopping relay, once its turns are given back). */
  leaveTurns(): Promise<void> {
    return this.#turn.leave();
  }

  /** The PostgreSQL backends holding (granted) or waiting for this outbox's relay turn. */
  turnSessions(): Promise<TurnSession[]> {
    return this.#turn.sessions();
  }

  /**
   * Claims up to `limit` due rows, hands them to `deliver`, and deletes them once it resolved.
   * Returns how many rows were delivered.
   *
   * A claim is a lease, not an open transaction: one statement moves the claimed rows' due time
   * `leaseMs` ahead (FOR UPDATE SKIP LOCKED picks them), so no other claimer sees them while they
   * are being delivered; a failed delivery hands them back (due time restored) for the next claim,
   * and a claimer that dies — or loses PostgreSQL — before the delete leaves them to come back when
   * the lease ends: delivered at least once, never lost.
   * Why not one transaction around claim, delivery and delete: when PostgreSQL goes away while a
   * postgres.js (3.4.9) transaction is open, the next statement on its connection — ours, or the
   * ROLLBACK postgres.js sends itself — throws an uncatchable TypeError that kills the process
   * (porsager/postgres#1154, #1208). Here every statement runs alone on the pool, which only fails it.
   *
   * `aheadMs` stages rows before their due time: rows due within it are claimed now (each keeps
   * its due time: `dueAt` is the row's, not the claim's). The lease then moves the due time
   * `aheadMs + leaseMs` ahead, so that a claimed row is claimable again only once the lease ended.
   * The price of overloading `due_at` with the lease: a row whose relay died before the delete comes
   * back with the lease's end as its due time, so it is late by up to `aheadMs + leaseMs` (never early).
   */
  async deliverDue(
    limit: number,
    deliver: (rows: ClaimedRow[]) => Promise<void>,
    leaseMs = DEFAULT_LEASE_MS,
    aheadMs = 0,
  ): Promise<number> {
    const rows = await this.sql`
      update outbox o set due_at = now() + ${aheadMs + leaseMs} * interval '1 millisecond'
      from (
        select id, due_at from outbox where due_at <= now() + ${aheadMs} * interval '1 millisecond'
        order by due_at, id
        limit ${limit}
        for update skip locked
      ) due
      where o.id = due.id
      returning o.id, o.task_id, o.request_id, due.due_at, o.topic, o.kafka_key, o.payload`;
    if (rows.length === 0) return 0;
    const claimedAt = Date.now();
    const claimed: ClaimedRow[] = rows
      .map((r) => ({
        id: String(r.id),
        taskId: r.task_id as string,
        requestId: r.request_id as string,
        dueAt: r.due_at as Date,
        topic: r.topic as string,
        key: r.kafka_key as string | null,
        payload: r.payload as Buffer,
      }))
      // RETURNING keeps no order: deliver in due order, as the rows were picked.
      .sort((a, b) => a.dueAt.getTime() - b.dueAt.getTime() || Number(BigInt(a.id) - BigInt(b.id)));
    const ids = claimed.map((r) => r.id);
    try {
      await deliver(claimed);
    } catch (err) {
      // Best effort: when PostgreSQL is unreachable too, the lease ends on its own.
      await this.sql`
        update outbox o set due_at = back.due_at
        from (select unnest(${ids}::bigint[]) as id, unnest(${claimed.map((r) => r.dueAt.toISOString())}::timestamptz[]) as due_at) back
        where o.id = back.id`.catch(() => {});
      throw err;
    }
    // The rows are in Kafka now. PostgreSQL may be restarting: retry the delete while the lease
    // holds (bounded). Past that the rows are delivered again — a duplicate on `in`, harmless (the
    // queue refuses a task id it holds or acked within its dedup window) but avoidable.
    const deleteUntil = Math.min(Date.now() + DELETE_RETRY_MS, claimedAt + leaseMs);
    for (;;) {
      try {
        await this.sql`delete from outbox where id = any(${ids}::bigint[])`;
        return claimed.length;
      } catch (err) {
        if (Date.now() >= deleteUntil) throw err;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }

  /**
   * Makes the rows of one request due now and wakes the relays (a cancel, see ../cancel: the relay
   * brings the request back through `in`, where the router answers it as cancelled at once instead
   * of when it was due). `client` is the request's (its rows' task ids end in ` @<client>`; none:
   * rows without one). Returns how many rows were woken. A row a relay holds claimed may be
   * delivered twice: the queue's dedup by task id keeps one.
   */
  async wake(client: string | undefined, requestId: string): Promise<number> {
    const scope = client ? `${CLIENT_SCOPE_SEPARATOR}${client}` : undefined;
    const rows = await this.sql`
      update outbox set due_at = now()
      where request_id = ${requestId}
        and ${
          scope === undefined
            ? this.sql`strpos(task_id, ${CLIENT_SCOPE_SEPARATOR}) = 0`
            : this.sql`right(task_id, ${scope.length}) = ${scope}`
        }
        and due_at > now()
      returning id`;
    if (rows.length > 0) await this.sql`select pg_notify(${OUTBOX_CHANNEL}, ${String(Date.now())})`;
    return rows.length;
  }

  /** Whether a row of this request waits here (`client`: whose, as for `wake`). */
  async holds(client: string | undefined, requestId: string): Promise<boolean> {
    const scope = client ? `${CLIENT_SCOPE_SEPARATOR}${client}` : undefined;
    const rows = await this.sql`
      select 1 from outbox
      where request_id = ${requestId}
        and ${
          scope === undefined
            ? this.sql`strpos(task_id, ${CLIENT_SCOPE_SEPARATOR}) = 0`
            : this.sql`right(task_id, ${scope.length}) = ${scope}`
        }
      limit 1`;
    return rows.length > 0;
  }

  /**
   * One page of the rows waiting, in due order, never the whole table: filtered by client (the
   * suffix of their task ids; `null`: rows without a client) and due window, after `cursor` (the
   * `next` of the previous page). Served by the due_at index. Claimed rows (a relay holds them)
   * show with their lease's end as due time.
   */
  async page(
    filter: WaitingFilter,
    limit: number,
    cursor?: string,
  ): Promise<{ rows: WaitingRow[]; next: string | null }> {
    const after = cursor ? parseCursor(cursor) : undefined;
    const sql = this.sql;
    const rows = await sql`
      select id, task_id, request_id, due_at, created_at,
        to_char(due_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as due_text,
        convert_from(payload, 'UTF8')::jsonb #>> '{request,uri}' as uri,
        convert_from(payload, 'UTF8')::jsonb #>> '{meta,partition}' as partition,
        convert_from(payload, 'UTF8')::jsonb #>> '{meta,deadline}' as deadline,
        convert_from(payload, 'UTF8')::jsonb #>> '{meta,debounce,key}' as debounce,
        convert_from(payload, 'UTF8')::jsonb #>> '{meta,concurrency,key}' as concurrency_key,
        convert_from(payload, 'UTF8')::jsonb #>> '{meta,concurrency,limit}' as concurrency_limit
      from outbox
      where ${this.#matching(filter)}
        ${after ? sql`and (due_at, id) > (${after.due}::timestamptz, ${after.id}::bigint)` : sql``}
      order by due_at, id
      limit ${limit + 1}`;
    const page = rows.slice(0, limit).map((r) => {
      const taskId = String(r.task_id);
      const at = taskId.indexOf(CLIENT_SCOPE_SEPARATOR);
      return {
        taskId,
        requestId: String(r.request_id),
        client: at < 0 ? null : taskId.slice(at + CLIENT_SCOPE_SEPARATOR.length),
        dueAt: (r.due_at as Date).getTime(),
        addedAt: (r.created_at as Date).getTime(),
        uri: (r.uri as string | null) ?? null,
        partition: (r.partition as string | null) ?? null,
        deadline: (r.deadline as string | null) ?? null,
        debounce: (r.debounce as string | null) ?? null,
        concurrency:
          typeof r.concurrency_key === 'string' && r.concurrency_limit !== null
            ? { key: r.concurrency_key, limit: Number(r.concurrency_limit) }
            : null,
        id: String(r.id),
        dueText: String(r.due_text),
      };
    });
    const last = page.at(-1);
    const next = rows.length > limit && last ? `${last.dueText}~${last.id}` : null;
    return { rows: page.map(({ id: _id, dueText: _d, ...row }) => row), next };
  }

  /** How many rows a filter of `page` matches (a bulk action's preview). */
  async countMatching(filter: WaitingFilter): Promise<number> {
    const [row] = await this.sql`select count(*)::int as n from outbox where ${this.#matching(filter)}`;
    return Number(row?.n ?? 0);
  }

  #matching(filter: WaitingFilter) {
    const sql = this.sql;
    const scope = typeof filter.client === 'string' ? `${CLIENT_SCOPE_SEPARATOR}${filter.client}` : undefined;
    return sql`true
        ${scope === undefined ? sql`` : sql`and right(task_id, ${scope.length}) = ${scope}`}
        ${filter.client === null ? sql`and strpos(task_id, ${CLIENT_SCOPE_SEPARATOR}) = 0` : sql``}
        ${filter.dueAfter === undefined ? sql`` : sql`and due_at >= ${new Date(filter.dueAfter)}`}
        ${filter.dueBefore === undefined ? sql`` : sql`and due_at < ${new Date(filter.dueBefore)}`}
        ${filter.addedBefore === undefined ? sql`` : sql`and created_at < ${new Date(filter.addedBefore)}`}
        ${
          filter.partition === undefined
            ? sql``
            : sql`and convert_from(payload, 'UTF8')::jsonb #>> '{meta,partition}' = ${filter.partition}`
        }`;
  }

  /** Epoch ms of the earliest row, or undefined when the outbox is empty. */
  async nextDueAt(): Promise<number | undefined> {
    const [row] = await this.sql`select extract(epoch from min(due_at)) * 1000 as due from outbox`;
    return row?.due == null ? undefined : Number(row.due);
  }

  /**
   * What `requester outbox info` shows, at the database's clock: rows, how many are overdue (due
   * and not yet claimed by a relay: a claim moves a row's due time ahead by its lease), the oldest
   * due time (in the past when relays lag), the next due time ahead, the last one, and the payload bytes.
   */
  async stats(): Promise<OutboxStats> {
    const [row] = await this.sql`
      select count(*)::int as rows,
             (count(*) filter (where due_at <= now()))::int as overdue,
             extract(epoch from min(due_at)) * 1000 as oldest_due,
             extract(epoch from min(due_at) filter (where due_at > now())) * 1000 as next_due,
             extract(epoch from max(due_at)) * 1000 as last_due,
             coalesce(sum(octet_length(payload)), 0)::bigint as payload_bytes,
             extract(epoch from now()) * 1000 as now
      from outbox`;
    const ms = (value: unknown) => (value == null ? null : Number(value));
    return {
      rows: Number(row?.rows ?? 0),
      overdue: Number(row?.overdue ?? 0),
      oldestDueAt: ms(row?.oldest_due),
      nextDueAt: ms(row?.next_due),
      lastDueAt: ms(row?.last_due),
      payloadBytes: Number(row?.payload_bytes ?? 0),
      nowMs: Number(row?.now),
    };
  }

  /**
   * Backlog for /metrics, by PostgreSQL's clock: rows, rows due now (or claimed ones whose lease
   * ran out), and how long ago the earliest due row fell due (0 when none is due). `min(due_at)` and
   * the due count walk the due_at index; `count(*)` visits every row, fine for an outbox of waits
   * (thousands to a few million rows) sampled every few seconds by each relay.
   */
  async backlog(): Promise<{ rows: number; due: number; oldestOverdueMs: number }> {
    const [row] = await this.sql`
      select count(*)::int as rows,
        count(*) filter (where due_at <= now())::int as due,
        coalesce(extract(epoch from (now() - min(due_at))) * 1000, 0)::float8 as overdue
      from outbox`;
    return {
      rows: Number(row?.rows ?? 0),
      due: Number(row?.due ?? 0),
      oldestOverdueMs: Math.max(0, Number(row?.overdue ?? 0)),
    };
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
