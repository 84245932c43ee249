import { clientScoped } from '../contract/namespace.ts';
import { type ErrorResultExtra, errorResult, type ResultEnvelope } from '../contract/result.ts';
import type { Journal } from '../journal/index.ts';
import type { Outbox } from '../outbox/index.ts';
import { type AnnouncementMark, type Announcements, Cluster, type RedisClient } from '../redis/index.ts';

/**
 * Cancels (docs/architecture.md §14): a request taken back by its owner (`DELETE /requests/{id}`)
 * or an operator (`requester cancel`, the admin API, the UI).
 *
 * A cancel is a mark in Redis, not a removal: the request may be on `in` not yet routed, in the
 * outbox, waiting in the queue (due, timer, behind an ordered head), leased, or in flight, and
 * chasing it through all of those would race with every hop. Instead each hop that is about to
 * *spend* something on a request asks whether it is cancelled — the executor before an attempt and
 * before rescheduling one, the router before parking one in the outbox — and the one holding it
 * then answers it with the one `cancelled` result. The canceller itself only wakes the outbox rows
 * of the request (so a request scheduled for next month is answered now, through the relay and the
 * router, and not next month) and never answers: one writer of the result, the hop that holds the
 * task, whose lease (or the queue's dedup by task id) makes it the only one.
 *
 * One key per cancelled request, `<prefix>:cancel:<clientScoped(client, requestId)>` = `{by, at}`,
 * kept CANCEL_RETENTION: requestIds are their client's (§10), so another client naming the same id
 * names another request and a cancel never reaches it. The first cancel wins (`SET NX GET`): asking
 * again answers who cancelled it and when. A cancel applies to the copies of the request accepted
 * before it (`createdAt`), so a requestId reused for a new request after the cancel runs.
 */
export interface Cancellation {
  /** Who: `client:<API key name>` (the owner), an admin key's name, or `cli:<os user>`. */
  by: string;
  /** When (epoch ms). */
  at: number;
}

export class Cancellations {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #retentionMs: number;
  #watch: Announcements | undefined;

  /** `prefix`: REDIS_PREFIX; `retentionMs`: CANCEL_RETENTION. */
  constructor(redis: RedisClient, prefix: string, retentionMs: number) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#retentionMs = retentionMs;
  }

  /** Where `record` announces a first cancel (its key is the message; see `watch`). */
  get channel(): string {
    return `${this.#prefix}:cancels`;
  }

  #key(client: string | undefined, requestId: string): string {
    return `${this.#prefix}:cancel:${clientScoped(client, requestId)}`;
  }

  /**
   * Records a cancel; when one was recorded already, that first one is kept and returned. A first
   * cancel is announced on `channel` in the same script as its write (see `watch`).
   */
  async record(
    client: string | undefined,
    requestId: string,
    by: string,
  ): Promise<{ cancellation: Cancellation; first: boolean }> {
    const cancellation: Cancellation = { by, at: Date.now() };
    const held = await this.#redis.eval(
      RECORD_LUA,
      1,
      this.#key(client, requestId),
      JSON.stringify(cancellation),
      String(Math.max(1, this.#retentionMs)),
      this.channel,
    );
    if (held === null || held === undefined) return { cancellation, first: true };
    return { cancellation: parseCancellation(String(held)) ?? cancellation, first: false };
  }

  /**
   * Heeds the announcements of new cancels (`announcements` subscribed to `channel`, owned and
   * closed by the caller), so that `unchangedSince` can vouch for a read: `record` writes and
   * announces in one script, so a cancel written after a read is heard of (within a pub/sub
   * delivery), and one heard of is read again. Without it, and while it is not subscribed, it
   * vouches for none.
   */
  watch(announcements: Announcements): this {
    this.#watch = announcements;
    return this;
  }

  /**
   * A mark to take right before a read of cancels is sent (`find`, `findMany`): undefined while
   * nothing is watched (see `watch`), or the watch is not subscribed.
   */
  mark(): AnnouncementMark | undefined {
    return this.#watch?.mark();
  }

  /**
   * Whether no cancel of the request can have been recorded since `mark` was taken, as far as this
   * process heard (see Announcements): then a read made after the mark still stands, and need not be
   * made again. False when unsure (no mark, the subscriber lost meanwhile, a mark too old).
   */
  unchangedSince(mark: AnnouncementMark | undefined, client: string | undefined, requestId: string): boolean {
    return (
      mark !== undefined &&
      this.#watch?.unchanged(mark, this.#key(client, requestId), CANCEL_MARK_MAX_MS) === true
    );
  }

  /**
   * The cancel of a request, when there is one that applies to a copy accepted at `createdAtMs`
   * (unknown: it applies). Concurrent calls share one pipeline (ioredis auto-pipelining), so the
   * checks of a lease batch or a routed batch cost one round trip.
   */
  async find(
    client: string | undefined,
    requestId: string,
    createdAtMs?: number,
  ): Promise<Cancellation | undefined> {
    return applying(await this.#redis.get(this.#key(client, requestId)), createdAtMs);
  }

  /**
   * `find` for many requests at once, in their order: one MGET (the executor's checks of a lease
   * batch), rather than a GET per request. On a Redis Cluster the keys lie in different slots, so
   * there each is a GET (pipelined per node by ioredis).
   */
  async findMany(
    requests: ReadonlyArray<{ client: string | undefined; requestId: string; createdAtMs?: number }>,
  ): Promise<Array<Cancellation | undefined>> {
    if (requests.length === 0) return [];
    const keys = requests.map((r) => this.#key(r.client, r.requestId));
    const texts =
      this.#redis instanceof Cluster
        ? await Promise.all(keys.map((key) => this.#redis.get(key)))
        : await this.#redis.mget(keys);
    return requests.map((r, i) => applying(texts[i] ?? null, r.createdAtMs));
  }
}

/** A first cancel's write and its announcement, one script: a subscriber that hears it then reads it. */
const RECORD_LUA = `local held = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
if not held then redis.call('PUBLISH', ARGV[3], KEYS[1]) end
return held`;

/** How long a read of a cancel is vouched for at most (see Announcements): a task parks 30 s at most. */
export const CANCEL_MARK_MAX_MS = 30_000;

/** The cancel stored as `text`, when it applies to a copy accepted at `createdAtMs` (unknown: it applies). */
function applying(text: string | null, createdAtMs: number | undefined): Cancellation | undefined {
  const cancellation = text === null ? undefined : parseCancellation(text);
  if (!cancellation) return undefined;
  return createdAtMs === undefined || createdAtMs <= cancellation.at ? cancellation : undefined;
}

function parseCancellation(text: string): Cancellation | undefined {
  try {
    const value = JSON.parse(text) as Partial<Cancellation>;
    if (typeof value.by === 'string' && typeof value.at === 'number') return { by: value.by, at: value.at };
  } catch {
    // not ours: ignored
  }
  return undefined;
}

/** Who a cancel by the request's owner names: its API key's name (none: AUTH=off). */
export function ownerActor(client: string | undefined): string {
  return client ? `client:${client}` : 'client';
}

/**
 * The one result of a cancelled request: status 499 (the convention for a request its client
 * gave up), `meta.error.code` `cancelled`, and `meta.cancelled` saying who and when.
 */
export function cancelledResult(
  requestId: string,
  cancellation: Cancellation,
  extra: Pick<ErrorResultExtra, 'tryCount' | 'waitTimeNs' | 'proxyData'> = {},
): ResultEnvelope {
  const at = new Date(cancellation.at).toISOString();
  const result = errorResult(requestId, 'cancelled', `cancelled by ${cancellation.by} at ${at}`, extra);
  return { ...result, meta: { ...result.meta, cancelled: { by: cancellation.by, at } } };
}

/** What a cancel did, as the HTTP API, the admin API and the CLI answer it. */
export interface CancelOutcome {
  requestId: string;
  client: string | null;
  /** Who and when: the first cancel of the request (asking again changes neither). */
  by: string;
  at: string;
  /** False when the request had been cancelled already (by `by`, at `at`). */
  first: boolean;
  /** Outbox rows of the request made due now, so that it is answered now rather than when due. */
  outboxWoken: number;
}

/**
 * Cancels one request of `client` (see Cancellations): records the cancel, then wakes the
 * request's outbox rows (in this order, so that the router meets the mark when they come back),
 * and journals a `cancelled` step. The request's one `cancelled` result is written by the hop
 * that holds it, not here.
 */
export async function cancelRequest(
  parts: {
    cancellations: Pick<Cancellations, 'record'>;
    outbox: () => Promise<Pick<Outbox, 'wake'>>;
    journal?: Journal;
  },
  client: string | undefined,
  requestId: string,
  by: string,
): Promise<CancelOutcome> {
  const { cancellation, first } = await parts.cancellations.record(client, requestId, by);
  const outboxWoken = await (await parts.outbox()).wake(client, requestId);
  if (first) parts.journal?.emit({ type: 'cancelled', requestId, client, by });
  return {
    requestId,
    client: client ?? null,
    by: cancellation.by,
    at: new Date(cancellation.at).toISOString(),
    first,
    outboxWoken,
  };
}
