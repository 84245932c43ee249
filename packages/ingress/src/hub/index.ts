import { LRUCache } from 'lru-cache';

/**
 * The Hub of one sync-gateway: results from `out` meet the HTTP callers waiting for them.
 *
 * Two halves, both keyed by requestId, both bounded:
 * - waiters: callers blocked on a result (a sync `POST /request`, a long-poll `GET /requests/:id`),
 *   at most `maxWaiters` of them: past that, `wait` answers `undefined` at once (see `crowded`);
 * - recent: an LRU of results that already passed, bounded by their bytes (`maxBytes`) and their
 *   age (`ttlMs`), so a caller that asks after the fact (a long-poll after a sync 202, a client that
 *   reconnects) is still answered. Results are up to KAFKA_MAX_MESSAGE_BYTES each, so a count bound
 *   would not bound memory. A result bigger than `maxBytes` on its own still wakes its waiters; it
 *   is just not kept for later callers. lru-cache drops an expired entry only when it is read or
 *   evicted for room, so under steady traffic every result stayed until `maxBytes` was full (64 MiB,
 *   the default then: ~25 minutes at 60 results/s, the soak's heap growth past the TTL); `publish` purges
 *   the expired ones every tenth of the TTL, so what is kept is what the TTL says.
 *
 * `wait` registers its waiter synchronously, before it returns: a caller registers first and only
 * then produces its request, so a result that comes back fast cannot slip past.
 *
 * `offer` keeps a result unread: under a key its id starts with (a result's requestId, `keyOf`),
 * with the function that reads its id. It is read (a JSON.parse, for the sync-gateway) only when
 * someone waits on that key when it comes, or asks for an id of that key later: a gateway that
 * follows all of `out` reads most results for nobody (docs/benchmarks/wake-ups.md, "Far schedules: fourth pass").
 */
export interface HubOptions<T> {
  /** Bytes of results kept for late callers (their `sizeOf`, plus ENTRY_OVERHEAD_BYTES each). */
  maxBytes: number;
  /** How long a result stays answerable after it passed. */
  ttlMs: number;
  /** Most callers blocked at once (default unbounded). */
  maxWaiters?: number;
  /** What a result costs in bytes; default: the UTF-8 length of a string (≥ its size in the V8 heap). */
  sizeOf?: (value: T) => number;
  /** Clock (ms); tests pass their own to age entries without sleeping. */
  now?: () => number;
  /** The key of an id, as `offer` is given it (default: the id itself). */
  keyOf?: (id: string) => string;
}

export interface WaitOptions {
  timeoutMs: number;
  /** Aborting resolves the wait with `undefined` at once (the produce failed, the client left). */
  signal?: AbortSignal;
}

/** What an entry costs besides its value: its key, the LRU's slots, the Map entry. */
export const ENTRY_OVERHEAD_BYTES = 256;

type Waiter<T> = (value: T | undefined) => void;

/** A result `offer`ed and not read yet: its id is `idOf(value, key)`, undefined when it has none. */
class Unread<T> {
  readonly value: T;
  readonly idOf: (value: T, key: string) => string | undefined;
  constructor(value: T, idOf: (value: T, key: string) => string | undefined) {
    this.value = value;
    this.idOf = idOf;
  }
}

/** Where an unread result is kept: a space starts no id (ids are printable names, `printableId`). */
const UNREAD = ' ';

export class Hub<T extends {} = string> {
  private readonly recent: LRUCache<string, T | Unread<T>>;
  private readonly waiters = new Map<string, Set<Waiter<T>>>();
  /** Waiters per key (`keyOf` of their id). */
  private readonly waitingKeys = new Map<string, number>();
  private readonly keyOf: (id: string) => string;
  private readonly maxWaiters: number;
  private blocked = 0;
  private readonly now: () => number;
  private readonly purgeEveryMs: number;
  private purgedAt: number;

  constructor(options: HubOptions<T>) {
    const sizeOf = options.sizeOf ?? ((value: T) => Buffer.byteLength(String(value)));
    this.maxWaiters = options.maxWaiters ?? Number.POSITIVE_INFINITY;
    this.now = options.now ?? (() => performance.now());
    this.keyOf = options.keyOf ?? ((id) => id);
    // No TTL (0): nothing expires, nothing to purge.
    this.purgeEveryMs = options.ttlMs > 0 ? options.ttlMs / 10 : Number.POSITIVE_INFINITY;
    this.purgedAt = this.now();
    this.recent = new LRUCache<string, T | Unread<T>>({
      maxSize: options.maxBytes,
      sizeCalculation: (value, id) =>
        sizeOf(value instanceof Unread ? value.value : value) + Buffer.byteLength(id) + ENTRY_OVERHEAD_BYTES,
      ttl: options.ttlMs,
      // A test clock is read as is (lru-cache otherwise caches the time for ttlResolution ms).
      ...(options.now ? { perf: { now: options.now }, ttlResolution: 0 } : {}),
    });
  }

  /**
   * Hands a result to everyone waiting for it and keeps it for late callers (when it fits).
   * Returns how many callers it woke.
   */
  publish(id: string, value: T): number {
    this.purgeExpired();
    // An earlier result of its key still unread goes first: this one, the later, stays.
    this.read(this.keyOf(id));
    // lru-cache refuses an entry bigger than maxBytes (and drops an older copy): nothing else to do.
    this.recent.set(id, value);
    const waiting = this.waiters.get(id);
    if (!waiting) return 0;
    this.waiters.delete(id);
    this.blocked -= waiting.size;
    this.unwaited(this.keyOf(id), waiting.size);
    for (const wake of waiting) wake(value);
    return waiting.size;
  }

  /**
   * `publish` of the result whose id `idOf(value, key)` reads (none: it is dropped), with that read put
   * off until someone waits on `key` or asks for an id of it. The result comes after any earlier
   * one of its key, as with `publish`. Returns how many callers it woke.
   */
  offer(key: string, value: T, idOf: (value: T, key: string) => string | undefined): number {
    if (this.waitingKeys.has(key)) {
      const id = idOf(value, key);
      return id === undefined ? 0 : this.publish(id, value);
    }
    this.purgeExpired();
    this.read(key);
    this.recent.set(UNREAD + key, new Unread(value, idOf));
    return 0;
  }

  /** A result that already passed (and is still kept), without waiting. */
  peek(id: string): T | undefined {
    this.read(this.keyOf(id));
    const value = this.recent.get(id);
    return value instanceof Unread ? undefined : value;
  }

  /** Reads the id of the unread result of `key`, if any, and keeps it under that id (its TTL left). */
  private read(key: string): void {
    const at = UNREAD + key;
    const entry = this.recent.peek(at);
    if (!(entry instanceof Unread)) return;
    const ttl = this.recent.getRemainingTTL(at);
    this.recent.delete(at);
    const id = entry.idOf(entry.value, key);
    if (id === undefined || ttl <= 0) return;
    this.recent.set(id, entry.value, Number.isFinite(ttl) ? { ttl } : {});
  }

  private unwaited(key: string, count: number): void {
    const left = (this.waitingKeys.get(key) ?? 0) - count;
    if (left > 0) this.waitingKeys.set(key, left);
    else this.waitingKeys.delete(key);
  }

  /**
   * The result for `id`: at once when it already passed, else when it arrives, else `undefined`
   * after `timeoutMs` (or on abort / `releaseAll`, or at once when `crowded`). Registration
   * happens before this returns.
   */
  wait(id: string, options: WaitOptions): Promise<T | undefined> {
    const known = this.peek(id);
    if (known !== undefined) return Promise.resolve(known);
    if (options.signal?.aborted || options.timeoutMs <= 0 || this.crowded())
      return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const finish: Waiter<T> = (value) => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        resolve(value);
      };
      const onAbort = () => {
        this.forget(id, finish);
        finish(undefined);
      };
      const timer = setTimeout(onAbort, options.timeoutMs);
      options.signal?.addEventListener('abort', onAbort, { once: true });
      let set = this.waiters.get(id);
      if (!set) {
        set = new Set();
        this.waiters.set(id, set);
      }
      set.add(finish);
      this.blocked++;
      const key = this.keyOf(id);
      this.waitingKeys.set(key, (this.waitingKeys.get(key) ?? 0) + 1);
    });
  }

  /** No room for another waiter: `wait` would answer `undefined` at once. */
  crowded(): boolean {
    return this.blocked >= this.maxWaiters;
  }

  /** Wakes every waiter empty-handed (shutdown: callers get 202 + Location rather than a cut). */
  releaseAll(): void {
    const all = [...this.waiters.values()];
    this.waiters.clear();
    this.waitingKeys.clear();
    this.blocked = 0;
    for (const set of all) for (const wake of set) wake(undefined);
  }

  /** Callers currently blocked (a gauge). */
  waiting(): number {
    return this.blocked;
  }

  /** Results currently kept. */
  size(): number {
    return this.recent.size;
  }

  /** Bytes the kept results are charged (never above `maxBytes`). */
  bytes(): number {
    return this.recent.calculatedSize;
  }

  /** Drops the expired results (a walk over all of them, hence only every tenth of the TTL). */
  private purgeExpired(): void {
    const now = this.now();
    if (now - this.purgedAt < this.purgeEveryMs) return;
    this.purgedAt = now;
    this.recent.purgeStale();
  }

  private forget(id: string, waiter: Waiter<T>): void {
    const set = this.waiters.get(id);
    if (!set?.delete(waiter)) return;
    this.blocked--;
    this.unwaited(this.keyOf(id), 1);
    if (set.size === 0) this.waiters.delete(id);
  }
}
