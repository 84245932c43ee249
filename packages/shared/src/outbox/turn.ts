import { RequesterError } from '../errors/index.ts';
import { type Sql, sessionPg } from '../pg/index.ts';

/**
 * High 32 bits of the relay turn's advisory lock key ('outb'); the low 32 bits are the outbox
 * table's oid, so deployments with outboxes of their own (another database, or another schema of
 * one) take turns apart. The migrations' lock (a small key) never meets it.
 */
const TURN_LOCK_CLASS = 0x6f757462;

/**
 * How long the client waits for any statement of the turn's session, connecting included. A
 * statement on a link that stalled (no error, no answer: a black-holed route, a hung peer) is
 * ended by neither postgres.js nor the server, and the turn's one-connection pool would wait
 * behind it for ever; past this the session's pool is ended (which drops the lock with the
 * session) and a new one is opened.
 * The server ends a wait for the lock at half of it (the session's `statement_timeout`), and the
 * wait is asked again: the deadline is never the way a healthy wait ends.
 */
export const DEFAULT_TURN_DEADLINE_MS = 10_000;

/** The PostgreSQL backends holding (granted) or waiting for an outbox's relay turn. */
export interface TurnSession {
  pid: number;
  granted: boolean;
}

/**
 * The relays' turn to claim and produce, across processes (docs/architecture.md §5, "Order"): a
 * session advisory lock on a one-connection pool of its own (sessionPg), held from before a claim
 * until its rows are produced (or handed back). Every statement on that session is bounded on the
 * client (`deadlineMs`); past it the pool is replaced, so a relay never waits behind a lost
 * session longer than the deadline and a reconnect.
 */
export class RelayTurn {
  readonly #sql: Sql;
  readonly #deadlineMs: number;
  #session: Sql | undefined;
  #key: string | undefined;
  #busy = false;

  constructor(sql: Sql, deadlineMs = DEFAULT_TURN_DEADLINE_MS) {
    this.#sql = sql;
    this.#deadlineMs = deadlineMs;
  }

  /**
   * Takes the turn, and resolves to the function that gives it back (which never throws). A
   * session lock is no transaction: PostgreSQL going away only fails the statement, and takes the
   * lock with the session; so does a relay that dies (kill -9 closes its connection). While
   * another relay holds the turn, the server ends each wait (statement_timeout, half the deadline)
   * and it is asked again, up to `maxWaitMs` in all; then this throws naming the holder's backend.
   * One caller at a time (the relay's workers take their turns one after the other first).
   */
  async take(maxWaitMs: number): Promise<() => Promise<void>> {
    if (this.#busy) throw new Error('RelayTurn.take: the turn is already taken in this process');
    this.#busy = true;
    try {
      const startedAt = Date.now();
      const key = await this.#lockKey();
      for (;;) {
        const session = this.#openSession();
        try {
          await this.#bounded(session, () => session`select pg_advisory_lock(${key}::bigint)`);
          return () => this.#giveBack(session, key);
        } catch (err) {
          if ((err as { code?: string }).code !== '57014') throw err;
          if (Date.now() - startedAt < maxWaitMs) continue; // statement_timeout: another relay's turn
          throw new RequesterError(
            'timeout',
            `waited ${Date.now() - startedAt} ms for the relay turn, held by PostgreSQL backend ${await this.#holder()}`,
            { cause: err },
          );
        }
      }
    } catch (err) {
      this.#busy = false;
      throw err;
    }
  }

  /** Closes the turn's session (a stopping relay, once its turns are given back). */
  async leave(): Promise<void> {
    const session = this.#session;
    this.#session = undefined;
    await session?.end({ timeout: 5 });
  }

  /** The backends holding or waiting for this outbox's turn (asked on the outbox's own pool). */
  async sessions(): Promise<TurnSession[]> {
    const rows = await this.#sql`
      select pid, granted from pg_locks
      where locktype = 'advisory' and objsubid = 1
        and ((classid::bigint << 32) | objid::bigint)
          = ((${TURN_LOCK_CLASS}::bigint << 32) | 'outbox'::regclass::oid::bigint)`;
    return rows.map((r) => ({ pid: Number(r.pid), granted: Boolean(r.granted) }));
  }

  #openSession(): Sql {
    this.#session ??= sessionPg(this.#sql, Math.ceil(this.#deadlineMs / 2));
    return this.#session;
  }

  /** The lock's key, read once on the turn's session (bounded like every statement there). */
  async #lockKey(): Promise<string> {
    if (this.#key) return this.#key;
    const session = this.#openSession();
    const [row] = await this.#bounded(
      session,
      () =>
        session`select ((${TURN_LOCK_CLASS}::bigint << 32) | 'outbox'::regclass::oid::bigint)::text as key`,
    );
    this.#key = String(row?.key);
    return this.#key;
  }

  /**
   * Unlocks on the lock's session. When that session was lost meanwhile (the lock with it), the
   * pool's new connection holds no lock: the unlock returns false (a warning, not an error); past
   * the deadline the session is ended, which drops the lock too.
   */
  async #giveBack(session: Sql, key: string): Promise<void> {
    try {
      await this.#bounded(session, () => session`select pg_advisory_unlock(${key}::bigint)`);
    } catch {
      // The session is gone, or ended here: its lock with it.
    } finally {
      this.#busy = false;
    }
  }

  /**
   * Runs `statement` on `session`, failing it after the deadline. The statement itself may never
   * settle (that is the case this is for): the session's pool is then ended, without waiting, so
   * what its connection holds (the lock) goes with it, and the next statement opens a new pool.
   */
  async #bounded<T>(session: Sql, statement: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new RequesterError(
      'timeout',
      `a statement of the relay turn's PostgreSQL session did not settle within ${this.#deadlineMs} ms: its session is replaced`,
    );
    const running = statement();
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(expired), this.#deadlineMs);
    });
    try {
      return await Promise.race([running, deadline]);
    } catch (err) {
      if (err === expired) {
        running.catch(() => {});
        this.#replace(session);
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  #replace(session: Sql): void {
    if (this.#session === session) this.#session = undefined;
    session.end({ timeout: 0 }).catch(() => {});
  }

  async #holder(): Promise<string> {
    const holder = (await this.sessions().catch(() => [])).find((s) => s.granted);
    return holder ? String(holder.pid) : 'unknown';
  }
}
