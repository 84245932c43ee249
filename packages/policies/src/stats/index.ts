import { createHash } from 'node:crypto';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import type { RedisClient } from '@requester/shared/redis';

/**
 * Deployment-wide call statistics per target origin (issue 22, the Origins page): attempts,
 * successes and a latency histogram per origin per minute, in Redis, so every admin process sees
 * what every executor did. Prometheus has the same per process; this is what the admin faces read
 * without a metrics backend.
 *
 * Off the hot path: an executor counts its calls in memory and writes them every FLUSH_MS, one
 * HINCRBY per non-zero field of each (origin, minute) it saw — a few commands per origin per
 * flush, whatever the call rate. A lost flush (Redis down, a crash) loses those seconds' counts,
 * never a call. Keys live KEEP_MS (two hours); the origins seen are a ZSET by last flush, trimmed
 * to that age when listed.
 *
 *   {prefix}ostats:origins                      ZSET origin -> last flush (ms)
 *   {prefix}ostats:{<hash of origin>}:<minute>  HASH n (attempts), ok (successes), b<i> (latency bucket i)
 *
 * A success is an answer below 500 other than 429 (what the breaker and pacing call healthy);
 * transport errors and timeouts are failures. Latencies are of answers and failures alike.
 */

/** Upper bounds (ms) of the latency buckets; the last bucket is everything above. */
export const LATENCY_BUCKETS_MS = [
  5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000,
] as const;
const MINUTE_MS = 60_000;
export const ORIGIN_STATS_KEEP_MS = 2 * 60 * MINUTE_MS;
const FLUSH_MS = 5_000;

const flushErrors = counter(
  'origin_stats_flush_errors_total',
  'flushes of the per-origin call statistics to Redis that failed (those seconds are not counted)',
);

interface Tally {
  n: number;
  ok: number;
  buckets: number[];
}

export interface OriginCallStats {
  origin: string;
  /** The window read (minutes, the current one included). */
  windowMinutes: number;
  attempts: number;
  successes: number;
  /** successes / attempts; null without attempts. */
  successRate: number | null;
  /** Latency percentiles (ms), the upper bound of the bucket they fall in; null without attempts. */
  p50Ms: number | null;
  p95Ms: number | null;
  /** When an executor last flushed calls of it (ms); null: not in the index. */
  lastSeenMs: number | null;
}

/** The bucket a latency falls in. */
export function bucketOf(latencyMs: number): number {
  const i = LATENCY_BUCKETS_MS.findIndex((bound) => latencyMs <= bound);
  return i === -1 ? LATENCY_BUCKETS_MS.length : i;
}

/**
 * The latency at quantile `q` of a histogram, as its bucket's upper bound (the overflow bucket:
 * the largest bound, as "above it"); null when empty.
 */
export function quantileOf(buckets: readonly number[], q: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.ceil(q * total);
  let seen = 0;
  for (const [i, count] of buckets.entries()) {
    seen += count;
    if (seen >= rank) return LATENCY_BUCKETS_MS[Math.min(i, LATENCY_BUCKETS_MS.length - 1)] ?? null;
  }
  return LATENCY_BUCKETS_MS[LATENCY_BUCKETS_MS.length - 1] ?? null;
}

export function originStatsIndexKey(prefix: string): string {
  return `${prefix}ostats:origins`;
}

function minuteKey(prefix: string, origin: string, minute: number): string {
  const tag = createHash('sha256').update(origin, 'utf8').digest('hex').slice(0, 32);
  return `${prefix}ostats:{${tag}}:${minute}`;
}

/** What an executor writes: counts calls in memory, flushes them every FLUSH_MS. */
export class OriginStatsRecorder {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #logger: Logger | undefined;
  /** origin -> minute -> tally, since the last flush. */
  #pending = new Map<string, Map<number, Tally>>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();

  constructor(options: { redis: RedisClient; prefix: string; logger?: Logger }) {
    this.#redis = options.redis;
    this.#prefix = options.prefix;
    this.#logger = options.logger;
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.flush(), FLUSH_MS);
    this.#timer.unref();
  }

  /** Counts one call (no I/O). */
  observe(origin: string, success: boolean, latencyMs: number, now = Date.now()): void {
    const minute = Math.floor(now / MINUTE_MS);
    let minutes = this.#pending.get(origin);
    if (!minutes) {
      minutes = new Map();
      this.#pending.set(origin, minutes);
    }
    let tally = minutes.get(minute);
    if (!tally) {
      tally = { n: 0, ok: 0, buckets: [] };
      minutes.set(minute, tally);
    }
    tally.n += 1;
    if (success) tally.ok += 1;
    const b = bucketOf(latencyMs);
    tally.buckets[b] = (tally.buckets[b] ?? 0) + 1;
  }

  /** Writes what was counted since the last flush; errors are counted and logged, not thrown. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(() => this.#write());
    return this.#flushing;
  }

  /** Stops the timer after a last flush. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }

  async #write(): Promise<void> {
    if (this.#pending.size === 0) return;
    const pending = this.#pending;
    this.#pending = new Map();
    const now = Date.now();
    const writes: Array<Promise<unknown>> = [];
    const index = originStatsIndexKey(this.#prefix);
    for (const [origin, minutes] of pending) {
      writes.push(this.#redis.zadd(index, now, origin));
      for (const [minute, tally] of minutes) {
        const key = minuteKey(this.#prefix, origin, minute);
        writes.push(this.#redis.hincrby(key, 'n', tally.n));
        if (tally.ok) writes.push(this.#redis.hincrby(key, 'ok', tally.ok));
        for (const [i, count] of tally.buckets.entries())
          if (count) writes.push(this.#redis.hincrby(key, `b${i}`, count));
        writes.push(this.#redis.pexpire(key, ORIGIN_STATS_KEEP_MS));
      }
    }
    // Auto-pipelined by the client: one round trip per node.
    const failed = (await Promise.allSettled(writes)).find((r) => r.status === 'rejected');
    if (failed) {
      flushErrors.inc();
      this.#logger?.warn(
        { err: String((failed as PromiseRejectedResult).reason) },
        'origin call statistics not written to Redis: those seconds are not counted',
      );
    }
  }
}

/** What the admin faces read: the origins seen, and each one's counts over a window. */
export class OriginStatsReader {
  readonly #redis: RedisClient;
  readonly #prefix: string;

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  /** The origins some executor called within ORIGIN_STATS_KEEP_MS, latest first, with when. */
  async origins(limit = 500, now = Date.now()): Promise<Array<{ origin: string; lastSeenMs: number }>> {
    const index = originStatsIndexKey(this.#prefix);
    await this.#redis.zremrangebyscore(index, '-inf', now - ORIGIN_STATS_KEEP_MS);
    const flat = await this.#redis.zrevrange(index, 0, limit - 1, 'WITHSCORES');
    const rows: Array<{ origin: string; lastSeenMs: number }> = [];
    for (let i = 0; i + 1 < flat.length; i += 2)
      rows.push({ origin: flat[i] as string, lastSeenMs: Number(flat[i + 1]) });
    return rows;
  }

  /** One origin's calls over the last `windowMinutes` minutes (the current one included). */
  async read(origin: string, windowMinutes = 15, now = Date.now()): Promise<OriginCallStats> {
    const last = Math.floor(now / MINUTE_MS);
    const minutes = Array.from({ length: windowMinutes }, (_, i) => last - i);
    const [hashes, seen] = await Promise.all([
      Promise.all(minutes.map((m) => this.#redis.hgetall(minuteKey(this.#prefix, origin, m)))),
      this.#redis.zscore(originStatsIndexKey(this.#prefix), origin),
    ]);
    let attempts = 0;
    let successes = 0;
    const buckets = new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0);
    for (const h of hashes) {
      attempts += Number(h.n ?? 0);
      successes += Number(h.ok ?? 0);
      for (const [i] of buckets.entries()) buckets[i] = (buckets[i] ?? 0) + Number(h[`b${i}`] ?? 0);
    }
    return {
      origin,
      windowMinutes,
      attempts,
      successes,
      successRate: attempts === 0 ? null : successes / attempts,
      p50Ms: quantileOf(buckets, 0.5),
      p95Ms: quantileOf(buckets, 0.95),
      lastSeenMs: seen === null ? null : Number(seen),
    };
  }
}
