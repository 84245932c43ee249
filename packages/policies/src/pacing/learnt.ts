import { LRUCache } from 'lru-cache';
import { MAX_KEYS, scopeOf } from './keys.ts';
import { originLabel, pacingMetrics } from './metrics.ts';

/** The least lateness past its slot that sends a call back to the gate: timers' own jitter is a few ms. */
export const LATE_FLOOR_MS = 10;

/**
 * What this process last learnt of each scope from the gate's and the reports' replies: its
 * concurrency limit, its pace, the hold its reports heard of. Read without a round trip, by the
 * bulkhead (the limit) and by a call that slept until its slot (the pace, the hold).
 */
export class LearntPace {
  /** The last limit Redis told of each scope: what the bulkhead applies without a round trip. */
  private readonly limits = new LRUCache<string, number>({ max: MAX_KEYS });
  /** The last pace Redis told of each scope (calls/s): how late a woken call may still leave. */
  private readonly rates = new LRUCache<string, number>({ max: MAX_KEYS });
  /** Each scope's last hold this process's reports heard of: when it ends, when it was heard (epoch ms). */
  private readonly holds = new LRUCache<string, { untilMs: number; heardMs: number }>({ max: MAX_KEYS });

  /** Keeps a reply's limit and pace (undefined pace: unpaced), and samples the gauges. */
  remember(origin: string, scope: string, limit: number | undefined, rate: number | undefined): void {
    const label = originLabel.of(origin);
    if (rate === undefined) this.rates.delete(scope);
    else this.rates.set(scope, rate);
    if (limit !== undefined) {
      this.limits.set(scope, limit);
      pacingMetrics.limit.set({ origin: label }, Math.floor(limit));
    }
    pacingMetrics.rate.set({ origin: label }, rate ?? 0);
  }

  /** A report's reply held the scope for `holdMs` from now. */
  heardHold(scope: string, holdMs: number): void {
    const now = Date.now();
    this.holds.set(scope, { untilMs: now + holdMs, heardMs: now });
  }

  /** See `OriginPacer.heldForMs`. */
  heldForMs(origin: string, sinceMs: number, nowMs: number, identity: string | undefined): number {
    const scope = scopeOf(origin, identity);
    const hold = this.holds.get(scope);
    if (hold === undefined) return 0;
    if (hold.untilMs <= nowMs) {
      this.holds.delete(scope);
      return 0;
    }
    return hold.heardMs >= sinceMs ? hold.untilMs - nowMs : 0;
  }

  /** See `OriginPacer.limitOf`. */
  limitOf(origin: string, identity: string | undefined): number | undefined {
    const limit =
      (identity === undefined ? undefined : this.limits.get(scopeOf(origin, identity))) ??
      this.limits.get(origin);
    return limit === undefined ? undefined : Math.max(1, Math.floor(limit));
  }

  /** See `OriginPacer.lateToleranceMs`. */
  lateToleranceMs(origin: string, identity: string | undefined): number {
    const rate = this.rates.get(scopeOf(origin, identity)) ?? this.rates.get(origin);
    return rate && rate > 0 ? Math.max(LATE_FLOOR_MS, 500 / rate) : Number.POSITIVE_INFINITY;
  }

  /** Forgets the scope's limit (a reset). */
  forget(scope: string): void {
    this.limits.delete(scope);
  }
}
