/**
 * The Hub of one sync-gateway: results from `out` meet the HTTP callers waiting for them.
 *
 * Two halves, both keyed by requestId:
 * - waiters: callers blocked on a result (a sync `POST /request`, a long-poll `GET /requests/:id`);
 * - recent: a bounded LRU (entries and TTL) of results that already passed, so a caller that asks
 *   after the fact (a long-poll after a sync 202, a client that reconnects) is still answered.
 *
 * `wait` registers its waiter synchronously, before it returns: a caller registers first and only
 * then produces its request, so a result that comes back fast cannot slip past.
 */
export interface HubOptions {
  /** Most results kept for late callers. */
  maxEntries: number;
  /** How long a result stays answerable after it passed. */
  ttlMs: number;
  /** Clock (epoch ms); tests pass their own to age entries without sleeping. */
  now?: () => number;
}

export interface WaitOptions {
  timeoutMs: number;
  /** Aborting resolves the wait with `undefined` at once (the produce failed, the client left). */
  signal?: AbortSignal;
}

interface Entry<T> {
  value: T;
  expiresAt: number;
}

type Waiter<T> = (value: T | undefined) => void;

export class Hub<T> {
  private readonly recent = new Map<string, Entry<T>>();
  private readonly waiters = new Map<string, Set<Waiter<T>>>();
  private readonly maxEntries: number;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(options: HubOptions) {
    this.maxEntries = options.maxEntries;
    this.ttlMs = options.ttlMs;
    this.now = options.now ?? Date.now;
  }

  /** Hands a result to everyone waiting for it and keeps it for late callers. */
  publish(id: string, value: T): void {
    this.remember(id, value);
    const waiting = this.waiters.get(id);
    if (!waiting) return;
    this.waiters.delete(id);
    for (const wake of waiting) wake(value);
  }

  /** A result that already passed (and is still kept), without waiting. */
  peek(id: string): T | undefined {
    const entry = this.recent.get(id);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.recent.delete(id);
      return undefined;
    }
    // Refresh the LRU position: Map iteration order is insertion order.
    this.recent.delete(id);
    this.recent.set(id, entry);
    return entry.value;
  }

  /**
   * The result for `id`: at once when it already passed, else when it arrives, else `undefined`
   * after `timeoutMs` (or on abort / `releaseAll`). Registration happens before this returns.
   */
  wait(id: string, options: WaitOptions): Promise<T | undefined> {
    const known = this.peek(id);
    if (known !== undefined) return Promise.resolve(known);
    if (options.signal?.aborted || options.timeoutMs <= 0) return Promise.resolve(undefined);
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
    });
  }

  /** Wakes every waiter empty-handed (shutdown: callers get 202 + Location rather than a cut). */
  releaseAll(): void {
    const all = [...this.waiters.values()];
    this.waiters.clear();
    for (const set of all) for (const wake of set) wake(undefined);
  }

  /** Callers currently blocked (a gauge). */
  waiting(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /** Results currently kept. */
  size(): number {
    return this.recent.size;
  }

  private remember(id: string, value: T): void {
    this.recent.delete(id);
    this.recent.set(id, { value, expiresAt: this.now() + this.ttlMs });
    this.evict();
  }

  /** Drops expired entries from the old end, then the least recently used above the bound. */
  private evict(): void {
    const now = this.now();
    for (const [id, entry] of this.recent) {
      if (this.recent.size <= this.maxEntries && entry.expiresAt > now) break;
      this.recent.delete(id);
    }
  }

  private forget(id: string, waiter: Waiter<T>): void {
    const set = this.waiters.get(id);
    if (!set) return;
    set.delete(waiter);
    if (set.size === 0) this.waiters.delete(id);
  }
}
