import { apiKeyLimiterPrefix } from '@requester/ingress';
import {
  inspectLimiter,
  type LimiterWindow,
  type LimiterWindowState,
  limiterKeyOf,
} from '@requester/policies';
import { type Config, durationToMs, type RedisClient, UsageError } from '@requester/shared';
import { isoTime } from '../format.ts';

/** The windows of a rate-limiter key: `requester limiter show` (./cli.ts), the API and the UI's Limiters page. */

export type LimiterView = Omit<LimiterWindowState, 'resetAtMs'> & { resetAt: string | null };

/**
 * The current windows of a limiter key: the executor's (meta.limiter.key), or with `apiKey` the
 * ingress's per-API-key rate (its own prefix). `quota`: the value of its calendar quota, which
 * Redis does not hold either.
 */
export async function showLimiter(
  redis: RedisClient,
  config: Pick<Config, 'redisPrefix' | 'sharedLimiterKeys'>,
  key: string,
  rates: LimiterWindow[],
  apiKey = false,
  client?: string,
  quota?: number,
): Promise<{ windows: LimiterWindowState[]; views: LimiterView[] }> {
  const prefix = apiKey ? apiKeyLimiterPrefix(config.redisPrefix) : `${config.redisPrefix}:`;
  // A request's limiter key is its client's, unless declared shared: the one the executor spends.
  const name = apiKey ? key : limiterKeyOf(client, key, config.sharedLimiterKeys);
  const windows = await inspectLimiter(redis, prefix, name, rates, quota);
  return { windows, views: windows.map(({ resetAtMs, ...w }) => ({ ...w, resetAt: isoTime(resetAtMs) })) };
}

/** `100/1s`, `5000/1h`, `10/s` (a bare unit means one of it). */
export function rateArg(text: string): LimiterWindow {
  const match = /^(\d+)\/(\d*\.?\d*[a-zµ]+)$/.exec(text.trim());
  const value = Number(match?.[1]);
  if (!match || !Number.isSafeInteger(value) || value < 1)
    throw new UsageError(`--rate ${JSON.stringify(text)} is not <value>/<duration>, e.g. 100/1s or 5000/1h`);
  const duration = /^\d/.test(match[2] ?? '') ? (match[2] ?? '') : `1${match[2]}`;
  let durationMs: number;
  try {
    durationMs = durationToMs(duration);
  } catch (err) {
    throw new UsageError(
      `--rate ${JSON.stringify(text)}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  if (durationMs < 1) throw new UsageError(`--rate ${JSON.stringify(text)}: a window is at least 1ms`);
  return { durationMs, value };
}

/** A calendar quota's value (`--quota 1000000`): a whole number of units, at least 1. */
export function quotaArg(text: string): number {
  const value = Number(text.trim());
  if (!Number.isSafeInteger(value) || value < 1)
    throw new UsageError(`--quota ${JSON.stringify(text)} is not a whole number of units, e.g. 1000000`);
  return value;
}

/** How a window or a quota shows its span: `1s`, or a quota's `month from day 15 (Europe/Paris)`. */
export function spanOf(
  window: Pick<LimiterWindowState, 'durationMs' | 'calendar'>,
  human: (ms: number) => string,
): string {
  if (window.calendar !== null) {
    const [period, resetDay, ...zone] = window.calendar.split(':');
    const from = period === 'day' ? '' : ` from ${period === 'week' ? 'weekday' : 'day'} ${resetDay}`;
    return `${period}${from} (${zone.join(':')})`;
  }
  return window.durationMs === null ? 'all' : human(window.durationMs);
}
