import { clientScoped } from '../contract/namespace.ts';
import type { RedisClient } from '../redis/index.ts';

/**
 * Pauses (docs/architecture.md §15): an operator holds the work of one target origin, one client or
 * one partition, until resumed or until an instant. Paused work stays where it is — queued, in
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
export const PAUSE_SCOPES = ['origin', 'client', 'partition'] as const;
export type PauseScope = (typeof PAUSE_SCOPES)[number];

export interface Pause {
  scope: PauseScope;
  /** An origin (`https://api.x.com:443`), a client (API key name) or a queue partition (in its client's namespace). */
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

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis;
    this.#key = `${prefix}:pauses`;
  }

  /** Pauses (or re-pauses, replacing its `until`) the work of one scope. */
  async pause(scope: PauseScope, value: string, by: string, until: number | null = null): Promise<Pause> {
    const pause: Pause = { scope, value, by, at: Date.now(), until };
    await this.#redis.hset(this.#key, `${scope} ${value}`, JSON.stringify({ by, at: pause.at, until }));
    return pause;
  }

  /** Resumes one scope; false when it was not paused. */
  async resume(scope: PauseScope, value: string): Promise<boolean> {
    return (await this.#redis.hdel(this.#key, `${scope} ${value}`)) > 0;
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

/**
 * An executor's view of the pauses, read again for every lease batch (`refresh`, run beside the
 * batch's read of its `in` records, so it adds no wait): a pause recorded before a task is leased
 * holds it, on every executor. Redis not answering keeps the last view (a pause is not lifted by
 * an outage, nor imposed by one).
 */
export class PauseView {
  readonly #pauses: Pick<Pauses, 'list'>;
  #byKey = new Map<string, Pause>();

  constructor(pauses: Pick<Pauses, 'list'>) {
    this.#pauses = pauses;
  }

  async refresh(): Promise<void> {
    try {
      const pauses = await this.#pauses.list();
      this.#byKey = new Map(pauses.map((p) => [`${p.scope} ${p.value}`, p]));
    } catch {
      // keep the last view
    }
  }

  /** The pause holding a task of this origin, client and queue partition, if one does now. */
  match(
    task: { origin?: string | undefined; client?: string | undefined; partition: string },
    now = Date.now(),
  ) {
    if (this.#byKey.size === 0) return undefined;
    const candidates = [
      task.origin === undefined ? undefined : this.#byKey.get(`origin ${task.origin}`),
      task.client === undefined ? undefined : this.#byKey.get(`client ${task.client}`),
      this.#byKey.get(`partition ${task.partition}`),
    ];
    return candidates.find((p) => p !== undefined && (p.until === null || p.until > now));
  }
}
