import type { LimiterAlgorithm } from '@requester/shared/contract';
import type { Cluster, Redis, RedisClient } from '@requester/shared/redis';
import { algorithmOfTag, type LimiterWindow, QUOTA_TAG } from './spec.ts';

/**
 * Read-only view of one limiter key's windows (`requester limiter show`), decoding the state the
 * scripts in `commands/` keep (layout: README "Redis layout"). Redis holds durations but not the
 * windows' values (they come with each take's spec): given the rates, used/remaining are computed;
 * without, only what the state alone tells (counts, reset times). The same holds of a calendar
 * quota's value.
 */
export interface LimiterWindowState {
  /** `calendar-quota`: the limiter's calendar quota (`meta.limiter.quota`). */
  algorithm: LimiterAlgorithm | 'calendar-quota';
  /** null: the sliding log inspected without rates (one log serves every window). A quota: its current period's length. */
  durationMs: number | null;
  /** A calendar quota's calendar, `<period>:<reset day>:<time zone>` (`month:15:Europe/Paris`); null for a window. */
  calendar: string | null;
  /** The window's value, when the caller gave the rates. */
  value: number | null;
  /** Calls counted in the window now (bucket: its level), fractional for the estimates; null when unknown. */
  used: number | null;
  /** Calls of cost 1 it admits now (as a take would compute it); null without the value. */
  remaining: number | null;
  /** Epoch ms (Redis clock) when the window holds nothing any more: full quota again; null when empty now. */
  resetAtMs: number | null;
  key: string;
}

/** The windows of `key` that hold state now, shortest first per algorithm. */
export async function inspectLimiter(
  redis: RedisClient,
  prefix: string,
  key: string,
  rates: readonly LimiterWindow[] = [],
  quotaValue?: number,
): Promise<LimiterWindowState[]> {
  const base = `${prefix}{lim:${key}}:`;
  const keys = (await scanKeys(redis, `${globEscape(base)}*`)).sort();
  const [seconds, micros] = await redis.time();
  const nowUs = Number(seconds) * 1e6 + Number(micros);
  const valueFor = (durationMs: number) => rates.find((r) => r.durationMs === durationMs)?.value ?? null;
  const states: LimiterWindowState[] = [];
  for (const redisKey of keys) {
    const [tag, duration] = redisKey.slice(base.length).split(':');
    if (tag === QUOTA_TAG) {
      const stored = await redis.get(redisKey);
      const calendar = redisKey.slice(base.length + QUOTA_TAG.length + 1);
      if (stored !== null) states.push(quota(redisKey, calendar, stored, nowUs / 1000, quotaValue ?? null));
      continue;
    }
    const algorithm = algorithmOfTag(tag ?? '');
    if (!algorithm) continue;
    if (algorithm === 'sliding-window-log') {
      states.push(...(await slidingLog(redis, redisKey, nowUs, rates)));
      continue;
    }
    const durationMs = Number(duration);
    const stored = await redis.get(redisKey);
    if (stored === null || !(durationMs > 0)) continue; // expired between the scan and the read
    const window = { algorithm, durationMs, calendar: null, value: valueFor(durationMs), key: redisKey };
    if (algorithm === 'fixed-window-counter') states.push(fixedWindow(window, stored, nowUs));
    else if (algorithm === 'sliding-window-counter') states.push(slidingCounter(window, stored, nowUs));
    else states.push(bucket(window, stored, nowUs));
  }
  return states.sort(
    (a, b) => a.algorithm.localeCompare(b.algorithm) || (a.durationMs ?? 0) - (b.durationMs ?? 0),
  );
}

type Window = Pick<LimiterWindowState, 'algorithm' | 'durationMs' | 'calendar' | 'value' | 'key'> & {
  durationMs: number;
};

/** STRING `<start ms>:<end ms>:<count>` of the current period (includes/windows.lua); an ended one counts nothing. */
function quota(
  key: string,
  calendar: string,
  stored: string,
  nowMs: number,
  value: number | null,
): LimiterWindowState {
  const [startMs = 0, endMs = 0, count = 0] = stored.split(':').map(Number);
  const window = { algorithm: 'calendar-quota' as const, durationMs: endMs - startMs, calendar, value, key };
  return withValue(window, nowMs < endMs ? count : 0, endMs);
}

function withValue(window: Window, used: number, resetAtMs: number | null): LimiterWindowState {
  const remaining = window.value === null ? null : Math.max(0, Math.floor(window.value - used + 1e-9));
  return { ...window, used, remaining, resetAtMs: used > 0 ? resetAtMs : null };
}

/** STRING TAT (µs): the instant the bucket is full again; level = (TAT − now) / interval. */
function bucket(window: Window, stored: string, nowUs: number): LimiterWindowState {
  const levelUs = Math.max(0, Number(stored) - nowUs);
  const resetAtMs = (nowUs + levelUs) / 1000;
  if (window.value === null)
    return { ...window, used: null, remaining: null, resetAtMs: levelUs > 0 ? resetAtMs : null };
  const intervalUs = (window.durationMs * 1000) / window.value;
  return withValue(window, round(levelUs / intervalUs), resetAtMs);
}

/** STRING `<k>:<count>` of the epoch-aligned window k; a stale k counts nothing. */
function fixedWindow(window: Window, stored: string, nowUs: number): LimiterWindowState {
  const number = Math.floor(nowUs / (window.durationMs * 1000));
  const [k, count] = stored.split(':').map(Number);
  const used = k === number ? (count ?? 0) : 0;
  return withValue(window, used, (number + 1) * window.durationMs);
}

/** STRING `<k>:<current>:<previous>`: estimate = previous · (1 − elapsed/d) + current. */
function slidingCounter(window: Window, stored: string, nowUs: number): LimiterWindowState {
  const us = window.durationMs * 1000;
  const number = Math.floor(nowUs / us);
  const [k, current = 0, previous = 0] = stored.split(':').map(Number);
  let [cur, prev] = [0, 0];
  if (k === number) [cur, prev] = [current, previous];
  else if (k === number - 1) prev = current;
  const elapsed = nowUs - number * us;
  const estimate = prev * (1 - elapsed / us) + cur;
  // The current window's calls weigh until the next window ends; the previous one's until this one ends.
  const resetAtMs = (number + (cur > 0 ? 2 : 1)) * window.durationMs;
  return withValue(window, round(estimate), resetAtMs);
}

/** ZSET of admissions (score µs): a range count per window, or the whole log without rates. */
async function slidingLog(
  redis: RedisClient,
  key: string,
  nowUs: number,
  rates: readonly LimiterWindow[],
): Promise<LimiterWindowState[]> {
  const algorithm = 'sliding-window-log' as const;
  if (rates.length === 0) {
    // The log expires one longest window after its last admission: that is when it is empty.
    const [count, pttl] = await Promise.all([redis.zcard(key), redis.pttl(key)]);
    const resetAtMs = pttl > 0 ? nowUs / 1000 + pttl : null;
    return [
      {
        algorithm,
        durationMs: null,
        calendar: null,
        value: null,
        used: count,
        remaining: null,
        resetAtMs,
        key,
      },
    ];
  }
  return Promise.all(
    rates.map(async ({ durationMs, value }) => {
      const after = `(${Math.floor(nowUs - durationMs * 1000)}`;
      const [count, newest] = await Promise.all([
        redis.zcount(key, after, '+inf'),
        redis.zrange(key, '+inf', after, 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES'),
      ]);
      const newestUs = newest[1] === undefined ? null : Number(newest[1]);
      const window = { algorithm, durationMs, calendar: null, value, key };
      return withValue(window, count, newestUs === null ? null : newestUs / 1000 + durationMs);
    }),
  );
}

async function scanKeys(redis: RedisClient, match: string): Promise<string[]> {
  const nodes: Redis[] = redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
  const found: string[] = [];
  for (const node of nodes)
    for await (const batch of node.scanStream({ match, count: 1_000 })) found.push(...(batch as string[]));
  return [...new Set(found)];
}

/** Redis MATCH treats `*`, `?`, `[`, `]` and `\` as pattern characters; a limiter key is literal. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}
