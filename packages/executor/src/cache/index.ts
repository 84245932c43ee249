import { randomUUID } from 'node:crypto';
import { ConfigError } from '@requester/shared/errors';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import { durationToMs, msToNs } from '@requester/shared/time';
import type { CallOutcome } from '../http/index.ts';
import { FillChannels } from './channels.ts';
import { type CacheKeys, cacheKeys } from './keys.ts';
import { cacheMetrics as metrics } from './metrics.ts';
import { type CacheScripts, type FillLock, loadCacheScripts } from './scripts.ts';

export { type AnsweredRequest, requestIdentity } from './keys.ts';
export { cacheMetrics } from './metrics.ts';

/** Which entry a fetch reads or fills, and for which request. */
export interface CacheLookup {
  /** The entry's key: the request's `meta.cache.key` in its client's namespace (`clientScoped`). */
  key: string;
  /** How long a stored answer is served (Go duration, `meta.cache.ttl`). */
  ttl: string;
  /**
   * The identity of the request (`requestIdentity`): an entry serves only the request it
   * answered; another request under the same key calls the target and stores nothing.
   */
  request: string;
}

/** What the cache stores and serves: the target's answer. */
export interface CachedResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * A hit, shaped like the response branch of the HTTP client's `CallOutcome` so that the caller
 * builds its result the same way; `durationNs` is the time spent serving it (lookup and waiting).
 */
export type CachedOutcome = CachedResponse & { kind: 'response'; durationNs: number };

/** What a call yields: a response (any status) or a failure. The HTTP client's `CallOutcome` is one. */
export type CallResultLike = (CachedResponse & { kind: 'response' }) | { kind: 'failure' };

/**
 * How a fetch was answered. `cached`: from the cache (the caller sets `meta.cached`). Otherwise the
 * outcome of a real call, which is this request's own unless `shared`: then it is the outcome of
 * the call another request of this process made for the same key at the same time (singleflight),
 * and this request made no call.
 */
export type CacheFetch<O extends CallResultLike> =
  | { cached: true; outcome: CachedOutcome }
  | { cached: false; outcome: O; shared: boolean };

export interface ResponseCacheOptions {
  /** Caller-owned; the cache adds one subscriber connection of its own (closed by `close`). */
  redis: RedisClient;
  /** The service's key prefix (e.g. `rq:`); keys are `<prefix>cache:{c:<sha256 of key>}:…`. */
  prefix: string;
  /**
   * Life of a fill lock; its holder renews it every third while the call runs, so this only bounds
   * how long a holder that died (kill -9) keeps others waiting before one of them takes over.
   */
  lockTtlMs?: number;
  /** How long a request waits for another process's fill before calling the target itself. */
  waitBudgetMs?: number;
  /** Largest stored entry (JSON of status, headers, body, in bytes); larger answers pass uncached. */
  maxEntryBytes?: number;
  logger?: Logger;
}

/** One fetch that has to fill the cache (or find it filled meanwhile). */
interface Fill<O> {
  keys: CacheKeys;
  ttlMs: number;
  /** This fetch's hold on the lock: its request's identity and a token of its own. */
  lock: FillLock;
  call: () => Promise<O>;
  started: number;
}

/**
 * The response cache with coalescing (docs/architecture.md §4 `meta.cache`, §5, §9, §10). Only 2xx
 * answers are stored, for the request's TTL. An entry is keyed by the client's cache key and
 * records the request it answered (`requestIdentity`): a fetch for another request under the same
 * key is a miss that calls the target and stores nothing. A miss is filled by one call:
 * - within a process, concurrent fetches of one key share one in-flight fill (singleflight);
 * - across processes, the fill takes a short Redis lock (`SET NX PX`, checked atomically with the
 *   value). The others subscribe to the key's pub/sub channel, check again, and wait for `stored`
 *   (then read the value) or `released` (the fill failed or was not cacheable: they call the target
 *   themselves). They also check again when the lock would lapse — a holder that died is replaced —
 *   and call the target themselves once `waitBudgetMs` is spent.
 * A Redis failure never fails a fetch: the target is called without the cache (`cache_errors_total`).
 * At most one call per process per fill is made when the fill succeeds; when it does not, every
 * waiting process makes its own (bounded by the number of processes, not of requests).
 */
export class ResponseCache<O extends CallResultLike = CallOutcome> {
  private readonly prefix: string;
  private readonly lockTtlMs: number;
  private readonly waitBudgetMs: number;
  private readonly maxEntryBytes: number;
  private readonly logger: Logger | undefined;
  private readonly scripts: CacheScripts;
  private readonly channels: FillChannels;
  /** In-flight fills by value key and request identity: the singleflight of this process. */
  private readonly flights = new Map<string, Promise<CacheFetch<O>>>();

  constructor(options: ResponseCacheOptions) {
    this.prefix = options.prefix;
    this.lockTtlMs = positiveInt('lockTtlMs', options.lockTtlMs ?? 5_000);
    this.waitBudgetMs = positiveInt('waitBudgetMs', options.waitBudgetMs ?? 10_000);
    this.maxEntryBytes = positiveInt('maxEntryBytes', options.maxEntryBytes ?? 256 * 1024);
    this.logger = options.logger;
    this.scripts = loadCacheScripts(options.redis);
    this.channels = new FillChannels(options.redis, options.logger);
  }

  /**
   * Answers from the cache, or runs `call` (at most once per key across concurrent fetches) and
   * stores its answer when it is a 2xx. `call` should not throw; if it does, the error reaches
   * this fetch and the ones sharing it, and waiting processes are released.
   */
  async fetchThrough(lookup: CacheLookup, call: () => Promise<O>): Promise<CacheFetch<O>> {
    const started = performance.now();
    const keys = cacheKeys(this.prefix, lookup.key);
    const flightKey = `${keys.value}\n${lookup.request}`;
    const inFlight = this.flights.get(flightKey);
    if (inFlight) return share(inFlight, started);
    const fill: Fill<O> = {
      keys,
      ttlMs: Math.max(1, durationToMs(lookup.ttl)),
      lock: { identity: lookup.request, token: randomUUID() },
      call,
      started,
    };
    const flight = this.fill(fill).finally(() => this.flights.delete(flightKey));
    this.flights.set(flightKey, flight);
    return flight;
  }

  /** Closes the subscriber connection (the caller owns and closes `redis`). */
  close(): Promise<void> {
    return this.channels.close();
  }

  private async fill(f: Fill<O>): Promise<CacheFetch<O>> {
    const reply = await this.acquire(f);
    if (!reply) return this.callAndStore(f, false);
    if (reply.kind === 'hit') return this.hit(f, reply.entry) ?? this.callAndStore(f, true);
    if (reply.kind === 'won') return this.callHoldingLock(f);
    if (reply.kind === 'other') return this.callBeside(f);
    return this.waitForFill(f);
  }

  /**
   * The key's entry, or its fill in progress, answers another request (another URL, method, body
   * or header under the same key): a miss. This request calls the target and stores nothing, so
   * the entry keeps answering its own request until it expires.
   */
  private async callBeside(f: Fill<O>): Promise<CacheFetch<O>> {
    const fetched = await this.callAndStore(f, false);
    if (isStorable(fetched.outcome)) metrics.skipped.inc({ reason: 'other_request' });
    return fetched;
  }

  /**
   * Another process holds the lock. Subscribing first and then checking again means a `stored`
   * or `released` sent after the first check cannot be missed.
   */
  private async waitForFill(f: Fill<O>): Promise<CacheFetch<O>> {
    const deadline = performance.now() + this.waitBudgetMs;
    const subscription = await this.channels.subscribe(f.keys.channel).catch((err: unknown) => {
      this.failed('subscribe', err);
    });
    if (!subscription) return this.endWait(f, 'error', false);
    try {
      for (;;) {
        const reply = await this.acquire(f);
        if (!reply) return this.endWait(f, 'error', false);
        if (reply.kind === 'hit') {
          metrics.waits.inc({ outcome: 'value' });
          return this.hit(f, reply.entry) ?? this.callAndStore(f, true);
        }
        if (reply.kind === 'won') {
          metrics.waits.inc({ outcome: 'took_over' });
          return this.callHoldingLock(f);
        }
        if (reply.kind === 'other') {
          metrics.waits.inc({ outcome: 'other_request' });
          return this.callBeside(f);
        }
        const left = deadline - performance.now();
        if (left <= 0) return this.endWait(f, 'timeout', true);
        // Wake at the latest when the lock would lapse: a holder that died announces nothing.
        const signal = await subscription.next(
          reply.lockPttlMs > 0 ? Math.min(reply.lockPttlMs, left) : left,
        );
        if (signal === 'released') return this.endWait(f, 'winner_failed', true);
      }
    } finally {
      subscription.close();
    }
  }

  private endWait(f: Fill<O>, outcome: 'error' | 'timeout' | 'winner_failed', store: boolean) {
    metrics.waits.inc({ outcome });
    return this.callAndStore(f, store);
  }

  private async callHoldingLock(f: Fill<O>): Promise<CacheFetch<O>> {
    const renew = setInterval(
      () => {
        this.scripts
          .extend(f.keys, f.lock, this.lockTtlMs)
          .catch((err: unknown) => this.failed('extend', err));
      },
      Math.max(1, Math.floor(this.lockTtlMs / 3)),
    );
    try {
      return await this.callAndStore(f, true);
    } finally {
      clearInterval(renew);
    }
  }

  /**
   * Calls the target and settles: stores a cacheable answer (`store`), releases the lock if this
   * fetch holds it. `store` is false when Redis just failed: no second timeout in a row.
   */
  private async callAndStore(f: Fill<O>, store: boolean): Promise<CacheFetch<O>> {
    metrics.requests.inc({ result: 'miss' });
    let outcome: O;
    try {
      outcome = await f.call();
    } catch (err) {
      if (store) await this.settle(f, undefined);
      throw err;
    }
    if (store) await this.settle(f, this.entryOf(outcome));
    return { cached: false, outcome, shared: false };
  }

  private entryOf(outcome: O): string | undefined {
    if (!isStorable(outcome)) return undefined;
    const { status, headers, body } = outcome;
    const entry = JSON.stringify({ status, headers, body });
    if (Buffer.byteLength(entry) <= this.maxEntryBytes) return entry;
    metrics.skipped.inc({ reason: 'oversize' });
    return undefined;
  }

  /** Never throws: a lock left behind lapses after `lockTtlMs`, and waiters then take over. */
  private async settle(f: Fill<O>, entry: string | undefined): Promise<void> {
    try {
      const { stored } = await this.scripts.settle(f.keys, f.lock, entry, f.ttlMs);
      if (stored) metrics.stores.inc();
    } catch (err) {
      this.failed('settle', err);
    }
  }

  private async acquire(f: Fill<O>) {
    try {
      return await this.scripts.acquire(f.keys, f.lock, this.lockTtlMs);
    } catch (err) {
      this.failed('acquire', err);
      return undefined;
    }
  }

  /** undefined when the stored entry cannot be read (then the caller calls and overwrites it). */
  private hit(f: Fill<O>, entry: string): CacheFetch<O> | undefined {
    const response = decodeEntry(entry);
    if (!response) {
      this.failed('decode', new Error(`unreadable cache entry at ${f.keys.value}`));
      return undefined;
    }
    metrics.requests.inc({ result: 'hit' });
    return { cached: true, outcome: { kind: 'response', ...response, durationNs: elapsedNs(f.started) } };
  }

  private failed(op: string, err: unknown): void {
    metrics.errors.inc({ op });
    this.logger?.warn({ err, op }, 'response cache failed; calling the target without it');
  }
}

/** A fetch that joined another's fill in this process gets its answer (a hit stays a hit). */
async function share<O extends CallResultLike>(
  flight: Promise<CacheFetch<O>>,
  started: number,
): Promise<CacheFetch<O>> {
  let result: CacheFetch<O>;
  try {
    result = await flight;
  } catch (err) {
    metrics.requests.inc({ result: 'coalesced' });
    throw err;
  }
  if (result.cached) {
    metrics.requests.inc({ result: 'hit' });
    return { cached: true, outcome: { ...result.outcome, durationNs: elapsedNs(started) } };
  }
  metrics.requests.inc({ result: 'coalesced' });
  return { cached: false, outcome: result.outcome, shared: true };
}

/** Only 2xx answers are stored. */
function isStorable(outcome: CallResultLike): outcome is CachedResponse & { kind: 'response' } {
  return outcome.kind === 'response' && outcome.status >= 200 && outcome.status <= 299;
}

function decodeEntry(entry: string): CachedResponse | undefined {
  try {
    const { status, headers, body } = JSON.parse(entry) as Partial<CachedResponse>;
    if (typeof status === 'number' && typeof body === 'string' && typeof headers === 'object' && headers) {
      return { status, headers, body };
    }
  } catch {
    // Not JSON: treated as unreadable below.
  }
  return undefined;
}

function elapsedNs(started: number): number {
  return msToNs(performance.now() - started);
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new ConfigError(`ResponseCache ${name} must be a positive integer, got ${value}`);
  }
  return value;
}
