import { capOf, defaultMaxPerOrigin, slotsKey } from '@requester/executor';
import { type CircuitBreaker, OriginPacer, OriginStatsReader } from '@requester/policies';
import { type Config, Pauses, type RedisClient, UsageError } from '@requester/shared';
import { type BreakerView, originArg, showBreaker } from '../breakers/index.ts';
import { isoTime } from '../format.ts';
import { type PauseRow, pauseRow } from '../pause/index.ts';

/**
 * Target origins across the deployment (issue 22): what every executor shares about each one in
 * Redis, on one row — its breaker, the calls in flight against the per-origin cap, its pace and
 * learnt concurrency limit, whether it is paused — with the calls of the last minutes (attempts,
 * success rate, p50/p95 latency) from the executors' per-origin statistics
 * (@requester/policies stats). `requester origins list|show`, `/admin/api/origins…`, the Origins
 * page.
 *
 * The origins listed are those some executor called within the statistics' two hours, those whose
 * breaker is open and those paused. Not shown: a rate limiter (its keys are the clients', not the
 * origins': the Limiters page), and the oldest task waiting for an origin (the queue is laid out by
 * client and partition, so finding it would read every task).
 */
export interface OriginParts {
  redis: RedisClient;
  config: Pick<
    Config,
    'redisPrefix' | 'maxWorkers' | 'maxWorkersPerOrigin' | 'originConcurrencyScope' | 'retryAfterMax'
  >;
  breaker: CircuitBreaker;
}

export interface OriginView {
  origin: string;
  breaker: BreakerView;
  bulkhead: {
    /** Calls in flight across the deployment; null when each executor counts its own (ORIGIN_CONCURRENCY_SCOPE=process). */
    inFlight: number | null;
    /** The cap now: MAX_WORKERS_PER_ORIGIN, or the learnt limit when lower. */
    cap: number;
    scope: 'process' | 'cluster';
  };
  pace: {
    /** No call starts before it; null: not held. */
    holdUntil: string | null;
    /** calls/s; null: unpaced. */
    rate: number | null;
    /** The pace the target advertised (calls/s); null: none. */
    ceiling: number | null;
    /** The adaptive concurrency limit (whole calls); null: not learnt yet. */
    limit: number | null;
  };
  pause: PauseRow | null;
  calls: {
    windowMinutes: number;
    attempts: number;
    successRate: number | null;
    p50Ms: number | null;
    p95Ms: number | null;
    lastSeen: string | null;
  };
}

/** An origin asked for (`origins show`, `?origin=`): any URL on it. */
export function originQuery(text: string | undefined): string {
  if (!text?.trim()) throw new UsageError('origins show needs an origin, e.g. https://api.x.com');
  return originArg(text.trim(), 'show');
}

/** Minutes of calls a view counts. */
export const CALLS_WINDOW_MINUTES = 15;

function pacer(parts: OriginParts): OriginPacer {
  return new OriginPacer({
    redis: parts.redis,
    prefix: `${parts.config.redisPrefix}:pace:`,
    maxLimit: maxPerOrigin(parts),
    retryAfterMaxMs: parts.config.retryAfterMax,
  });
}

function maxPerOrigin(parts: OriginParts): number {
  return parts.config.maxWorkersPerOrigin ?? defaultMaxPerOrigin(parts.config.maxWorkers);
}

/** One origin's view (an origin, normalized: see originArg). */
export async function showOrigin(parts: OriginParts, origin: string, now = Date.now()): Promise<OriginView> {
  const { redis, config } = parts;
  const cluster = config.originConcurrencyScope === 'cluster';
  const [breaker, pace, inFlight, paused, calls] = await Promise.all([
    showBreaker(parts.breaker, origin),
    pacer(parts).snapshot(origin),
    cluster ? redis.zcount(slotsKey(`${config.redisPrefix}:bulkhead:`, origin), now, '+inf') : null,
    new Pauses(redis, config.redisPrefix).list(now),
    new OriginStatsReader(redis, `${config.redisPrefix}:`).read(origin, CALLS_WINDOW_MINUTES, now),
  ]);
  const pause = paused.find((p) => p.scope === 'origin' && p.value === origin);
  const limit = pace.limit === undefined ? null : Math.max(1, Math.floor(pace.limit));
  return {
    origin,
    breaker,
    bulkhead: {
      inFlight,
      cap: capOf(maxPerOrigin(parts), limit ?? undefined),
      scope: cluster ? 'cluster' : 'process',
    },
    pace: {
      holdUntil: pace.holdUntilMs !== undefined && pace.holdUntilMs > now ? isoTime(pace.holdUntilMs) : null,
      rate: pace.rate ?? null,
      ceiling: pace.ceiling ?? null,
      limit,
    },
    pause: pause ? pauseRow(pause) : null,
    calls: {
      windowMinutes: calls.windowMinutes,
      attempts: calls.attempts,
      successRate: calls.successRate,
      p50Ms: calls.p50Ms,
      p95Ms: calls.p95Ms,
      lastSeen: isoTime(calls.lastSeenMs),
    },
  };
}

/**
 * The origins known across the deployment (called lately, breaker open, paused), most recently
 * called first, then the others by name; at most `limit`.
 */
export async function listOrigins(parts: OriginParts, limit = 200): Promise<OriginView[]> {
  const { redis, config } = parts;
  const [called, open, paused] = await Promise.all([
    new OriginStatsReader(redis, `${config.redisPrefix}:`).origins(limit),
    parts.breaker.openOrigins(limit),
    new Pauses(redis, config.redisPrefix).list(),
  ]);
  const others = [
    ...open.map((o) => o.origin),
    ...paused.filter((p) => p.scope === 'origin').map((p) => p.value),
  ].sort();
  const origins = [...new Set([...called.map((c) => c.origin), ...others])].slice(0, limit);
  return Promise.all(origins.map((origin) => showOrigin(parts, origin)));
}
