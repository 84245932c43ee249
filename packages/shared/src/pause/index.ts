import { clientScoped } from '../contract/namespace.ts';
import type { AnnouncementMark, Announcements, RedisClient } from '../redis/index.ts';

/**
 * Pauses (docs/architecture.md §15): an operator holds the work of one target origin, one client,
 * one partition or one destination (the requests naming it), until resumed or until an instant. Paused work stays where it is — queued, in
 * order — and is not attempted: the executor that leases such a task puts it back (a wait, not an
 * attempt: no limiter token, no breaker outcome) and looks again a second later.
 *
 * One Redis hash for the deployment, `<prefix>:pauses`, field `<scope> <value>` = `{by, at, until}`:
 * every executor reads it whole with each lease batch (PauseView), so a pause is honoured by the
 * next lease everywhere, a resume within PAUSE_RECHECK_MS (the wait of a held task), and both
 * survive restarts of every process. Pauses are few (an operator's levers, not data), so reading
 * them all is one small command pipelined beside the batch's reads, and matching a task is three
 * map look-ups.
 */
export const PAUSE_SCOPES = ['origin', 'client', 'partition', 'destination'] as const;
export type PauseScope = (typeof PAUSE_SCOPES)[number];

export interface Pause {
  scope: PauseScope;
  /** An origin (`https://api.x.com:443`), a client (API key name), a queue partition (in its client's namespace) or a destination name. */
  value: string;
  /** Who paused. */
  by: string;
  /** When (epoch ms). */
  at: number;
  /** Resumes by itself then (epoch ms); null: until resumed. */
  until: number | null;
}

/** The queue partition a pause by partition names: `partition` of `client` (§10). */
export function pausedPartition(client: string | undefined, partition: string): string {
  return clientScoped(client, partition);
}

export class Pauses {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #prefix: string;

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis;
    this.#key = `${prefix}:pauses`;
    this.#prefix = prefix;
  }

  /** The hash of the pauses: what `channel` announces (see PauseView). */
  get key(): string {
    return this.#key;
  }

  /** Where a pause or resume is announced with its write (the message is `key`; see PauseView). */
  get channel(): string {
    return `${this.#prefix}:pauses:changed`;
  }

  /** Pauses (or re-pauses, replacing its `until`) the work of one scope. */
  async pause(scope: PauseScope, value: string, by: string, until: number | null = null): Promise<Pause> {
    const pause: Pause = { scope, value, by, at: Date.now(), until };
    await this.#redis
      .multi()
      .hset(this.#key, `${scope} ${value}`, JSON.stringify({ by, at: pause.at, until }))
      .publish(this.channel, this.#key)
      .exec();
    return pause;
  }

  /** Resumes one scope; false when it was not paused. */
  async resume(scope: PauseScope, value: string): Promise<boolean> {
    const replies = await this.#redis
      .multi()
      .hdel(this.#key, `${scope} ${value}`)
      .publish(this.channel, this.#key)
      .exec();
    const [error, removed] = replies?.[0] ?? [null, 0];
    if (error) throw error;
    return Number(removed) > 0;
  }

  /** Every pause in force at `now`; lapsed ones are dropped from Redis on the way. */
  async list(now = Date.now()): Promise<Pause[]> {
    const fields = await this.#redis.hgetall(this.#key);
    const live: Pause[] = [];
    const lapsed: string[] = [];
    for (const [field, text] of Object.entries(fields)) {
      const pause = parsePause(field, text);
      if (!pause) continue;
      if (pause.until !== null && pause.until <= now) lapsed.push(field);
      else live.push(pause);
    }
    if (lapsed.length > 0) await this.#redis.hdel(this.#key, ...lapsed);
    return live.sort((a, b) => a.at - b.at);
  }
}

function parsePause(field: string, text: string): Pause | undefined {
  const space = field.indexOf(' ');
  const scope = field.slice(0, space) as PauseScope;
  if (space < 1 || !PAUSE_SCOPES.includes(scope)) return undefined;
  try {
    const { by, at, until } = JSON.parse(text) as { by?: unknown; at?: unknown; until?: unknown };
    if (typeof by !== 'string' || typeof at !== 'number') return undefined;
    return { scope, value: field.slice(space + 1), by, at, until: typeof until === 'number' ? until : null };
  } catch {
    return undefined;
  }
}

/** How long a read of the pauses is vouched for at most (see PauseView): a write not announced is seen within it. */
export const PAUSES_READ_MAX_MS = 1_000;

/**
 * An executor's view of the pauses, read again for every lease batch (`refresh`, run beside the
 * batch's read of its `in` records, so it adds no wait): a pause recorded before a task is leased
 * holds it, on every executor. Redis not answering keeps the last view (a pause is not lifted by
 * an outage, nor imposed by one).
 *
 * Watched (`announcements` on `Pauses.channel`, 2026-12-06): `pause` and `resume` announce their
 * write, so the last read stands while none was announced since it was sent and the subscriber
 * stayed subscribed, for PAUSES_READ_MAX_MS at most: `refresh` reads only then (about one HGETALL
 * a second rather than one per lease batch, ~0.15 command per call under load). A pause heard is read
 * by the next lease batch, as before; but one written within a pub/sub delivery (sub-millisecond)
 * before a lease may be heard just after that batch's refresh, and the batch's tasks then run, as
 * they would had the pause come just after the lease. While the subscriber is down, every batch
 * reads.
 */
export class PauseView {
  readonly #pauses: Pick<Pauses, 'list'> & Partial<Pick<Pauses, 'key'>>;
  readonly #announcements: Announcements | undefined;
  readonly #readMaxMs: number;
  #byKey = new Map<string, Pause>();
  /** Where the announcements stood when the view in hand was read (undefined: read at the next refresh). */
  #read: AnnouncementMark | undefined;

  /**
   * `announcements`: subscribed to `Pauses.channel` (owned and closed by the caller); `readMaxMs`:
   * how long a read stands at most (PAUSES_READ_MAX_MS).
   */
  constructor(
    pauses: Pick<Pauses, 'list'> & Partial<Pick<Pauses, 'key'>>,
    announcements?: Announcements,
    readMaxMs = PAUSES_READ_MAX_MS,
  ) {
    this.#pauses = pauses;
    this.#announcements = announcements;
    this.#readMaxMs = readMaxMs;
  }

  async refresh(): Promise<void> {
    const announcements = this.#announcements;
    const key = this.#pauses.key;
    if (
      announcements &&
      key !== undefined &&
      this.#read &&
      announcements.unchanged(this.#read, key, this.#readMaxMs)
    )
      return;
    const mark = announcements?.mark();
    try {
      const pauses = await this.#pauses.list();
      this.#byKey = new Map(pauses.map((p) => [`${p.scope} ${p.value}`, p]));
      this.#read = mark;
    } catch {
      // keep the last view, read again next time
      this.#read = undefined;
    }
  }

  /** Whether any pause is recorded: none (the usual case) needs no `match` per task. */
  get any(): boolean {
    return this.#byKey.size > 0;
  }

  /** The pause holding a task of this origin, client, queue partition or destination, if one does now. */
  match(
    task: {
      origin?: string | undefined;
      client?: string | undefined;
      partition: string;
      destination?: string | undefined;
    },
    now = Date.now(),
  ) {
    if (this.#byKey.size === 0) return undefined;
    const candidates = [
      task.origin === undefined ? undefined : this.#byKey.get(`origin ${task.origin}`),
      task.client === undefined ? undefined : this.#byKey.get(`client ${task.client}`),
      this.#byKey.get(`partition ${task.partition}`),
      task.destination === undefined ? undefined : this.#byKey.get(`destination ${task.destination}`),
    ];
    return candidates.find((p) => p !== undefined && (p.until === null || p.until > now));
  }
}
