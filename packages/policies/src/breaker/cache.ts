import { LRUCache } from 'lru-cache';
import { breakerMetrics } from './metrics.ts';
import type { Admission, BreakerScope, BreakerState, CallReport, HoldReason } from './types.ts';

/** `successAt`: when this executor last wrote a success of the (proven) origin to Redis. */
export type CacheEntry =
  | { healthy: true; successAt?: number }
  | {
      healthy: false;
      state: BreakerState;
      retryAtMs: number;
      held?: HoldReason | undefined;
      scope: BreakerScope;
    };
export const HEALTHY: CacheEntry = { healthy: true };

/**
 * What this executor last learnt of an origin (as one caller sees it), trusted for stateCacheMs:
 * a proven origin's calls and an open one's refusals then cost no Redis round trip. With
 * stateCacheMs 0 nothing is kept and every call asks Redis.
 */
export class BreakerCache {
  private readonly cache: LRUCache<string, CacheEntry> | undefined;
  private readonly stateCacheMs: number;

  constructor(stateCacheMs: number, maxCachedOrigins: number) {
    this.stateCacheMs = stateCacheMs;
    this.cache = stateCacheMs > 0 ? new LRUCache({ max: maxCachedOrigins, ttl: stateCacheMs }) : undefined;
  }

  /**
   * A success of a proven origin, admitted without a slot, changes nothing in Redis but a failure
   * count another executor may have started since, and the state's TTL. Written once per
   * stateCacheMs per origin (as long as this executor trusts its cached state anyway), it still
   * resets those, at most stateCacheMs late, and saves a script call per call to a healthy origin.
   */
  successAlreadyWritten(key: string, report: CallReport): boolean {
    if (!report.success || report.probe || report.ticket !== undefined || report.optOut) return false;
    const entry = this.cache?.get(key);
    return (
      entry?.healthy === true &&
      entry.successAt !== undefined &&
      Date.now() - entry.successAt < this.stateCacheMs
    );
  }

  /** The admission the cached state decides, or undefined: ask Redis. */
  admission(key: string): Admission | undefined {
    const entry = this.cache?.get(key);
    if (!entry) return undefined;
    if (entry.healthy) return { admitted: true, probe: false };
    if (Date.now() < entry.retryAtMs) {
      breakerMetrics.rejected.inc({ state: entry.state, source: 'cache', scope: entry.scope });
      const held = entry.held ? { held: entry.held } : {};
      return { admitted: false, retryAtMs: entry.retryAtMs, state: entry.state, scope: entry.scope, ...held };
    }
    this.cache?.delete(key); // its time has come: ask Redis
    return undefined;
  }

  /** Keeps what a script answered (undefined: forget it, the next call asks Redis). */
  remember(key: string, entry: CacheEntry | undefined): void {
    if (!this.cache) return;
    if (entry) this.cache.set(key, entry);
    else this.cache.delete(key);
  }

  /** Forgets every caller's cached state of `origin` (a key per caller: found by its prefix). */
  forgetOrigin(origin: string): void {
    if (!this.cache) return;
    for (const key of this.cache.keys()) if (originOfCacheKey(key) === origin) this.cache.delete(key);
  }

  clear(): void {
    this.cache?.clear();
  }
}

/** The local cache's key of an origin's state as one caller sees it (the newline is in no origin). */
export function cacheKeyOf(origin: string, caller: string | undefined): string {
  return caller === undefined ? origin : `${origin}\n${caller}`;
}

function originOfCacheKey(key: string): string {
  const end = key.indexOf('\n');
  return end < 0 ? key : key.slice(0, end);
}
