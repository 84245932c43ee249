import type { RedisClient } from '@requester/shared/redis';
import {
  callerIdOf,
  heldIndexKey,
  openCallersIndexKey,
  openIndexKey,
  originKeys,
  scopeKeys,
} from './keys.ts';
import { breakerMetrics, MAX_ORIGIN_LABELS } from './metrics.ts';
import { HOLD_CODES, ofHeldMember, toLocal } from './replies.ts';
import type { BreakerSnapshot, HeldOrigin, OpenOrigin } from './types.ts';

/**
 * The breaker's state as read from Redis, for the router's backpressure, the operator's listings
 * (`requester breakers list`) and tests: never on a call's path. A listing repairs its index
 * (members whose state ended or was forgotten), which the executors keep only best effort.
 */

/** Where a breaker's state lives, and how long an unheard-of origin is kept. */
export interface BreakerStore {
  redis: RedisClient;
  prefix: string;
  stateTtlMs: number;
}

/**
 * Origins whose breaker is open or half-open, latest open-until first (for backpressure: e.g.
 * pause when one stays open long). Also samples the `breaker_open*` gauges.
 */
export async function openOrigins(store: BreakerStore, limit = 1_000): Promise<OpenOrigin[]> {
  const index = openIndexKey(store.prefix);
  const now = await redisNow(store.redis);
  // Half-open origins nobody probed: their state has expired by now.
  await store.redis.zremrangebyscore(index, '-inf', now - store.stateTtlMs);
  const members = await store.redis.zrevrange(index, 0, limit - 1);
  const states = await Promise.all(
    members.map((origin) => store.redis.hmget(originKeys(store.prefix, origin)[0], 'u', 's')),
  );
  const open: OpenOrigin[] = [];
  const stale: string[] = [];
  for (const [i, origin] of members.entries()) {
    const [u, s] = (states[i] ?? []).map(Number);
    if (!u) {
      stale.push(origin); // closed by a process that died before unlisting it
      continue;
    }
    open.push({
      origin,
      state: now < u ? 'open' : 'half_open',
      retryAtMs: toLocal(u, now),
      openSinceMs: toLocal(s || u, now),
    });
  }
  if (stale.length > 0) await store.redis.zrem(index, ...stale);
  sampleGauges(open);
  sampleHeldGauges(await heldOrigins(store, limit));
  return open;
}

/**
 * Callers whose own breaker at an origin is open or half-open (only their calls failed there),
 * latest open-until first: the operator's listing; never backpressure (the origin is fine).
 */
export async function openCallers(
  store: BreakerStore,
  limit = 1_000,
): Promise<Array<OpenOrigin & { client: string }>> {
  const index = openCallersIndexKey(store.prefix);
  const now = await redisNow(store.redis);
  const members = await store.redis.zrevrange(index, 0, limit - 1);
  const states = await Promise.all(
    members.map((member) => {
      const { origin, client = '' } = ofHeldMember(member);
      return store.redis.hmget(scopeKeys(store.prefix, origin, callerIdOf(client))[2] ?? '', 'u', 's');
    }),
  );
  const open: Array<OpenOrigin & { client: string }> = [];
  const stale: string[] = [];
  for (const [i, member] of members.entries()) {
    const [u, s] = (states[i] ?? []).map(Number);
    if (!u) {
      stale.push(member); // closed, or forgotten
      continue;
    }
    const { origin, client = '' } = ofHeldMember(member);
    open.push({
      origin,
      client,
      state: now < u ? 'open' : 'half_open',
      retryAtMs: toLocal(u, now),
      openSinceMs: toLocal(s || u, now),
    });
  }
  if (stale.length > 0) await store.redis.zrem(index, ...stale);
  return open;
}

/** Origins held back, longest held first (also in `openOrigins`, which samples their gauges). */
export async function heldOrigins(store: BreakerStore, limit = 1_000): Promise<HeldOrigin[]> {
  const index = heldIndexKey(store.prefix);
  const [now, members] = await Promise.all([redisNow(store.redis), store.redis.zrange(index, 0, limit - 1)]);
  const states = await Promise.all(
    members.map((member) => {
      const { origin, client } = ofHeldMember(member);
      const key =
        client === undefined
          ? originKeys(store.prefix, origin)[0]
          : (scopeKeys(store.prefix, origin, callerIdOf(client))[2] ?? '');
      return store.redis.hmget(key, 'h', 'hw', 'fc', 'fs', 'u');
    }),
  );
  const held: HeldOrigin[] = [];
  const stale: string[] = [];
  for (const [i, member] of members.entries()) {
    const [h, hw, fc, fs, u] = states[i] ?? [];
    const reason = hw ? HOLD_CODES[hw] : undefined;
    if (!h || !reason) {
      stale.push(member); // ended (or forgotten) without its index entry being removed
      continue;
    }
    const { origin, client } = ofHeldMember(member);
    held.push({
      origin,
      ...(client === undefined ? {} : { client }),
      reason,
      sinceMs: toLocal(Number(h), now),
      failures: Number(fc ?? 0),
      failingSinceMs: fs ? toLocal(Number(fs), now) : undefined,
      nextProbeMs: reason === 'failing' && u ? toLocal(Number(u), now) : undefined,
    });
  }
  if (stale.length > 0) await store.redis.zrem(index, ...stale);
  return held;
}

/** The shared state of one origin, or of a caller's own breaker there, read from Redis (admin, tests). */
export async function snapshot(
  store: BreakerStore,
  origin: string,
  caller?: string,
): Promise<BreakerSnapshot> {
  const [stateKey = '', trialsKey = ''] =
    caller === undefined
      ? originKeys(store.prefix, origin)
      : scopeKeys(store.prefix, origin, callerIdOf(caller)).slice(2, 4);
  const now = await redisNow(store.redis);
  const [fields, slots] = await Promise.all([
    store.redis.hgetall(stateKey),
    store.redis.zcount(trialsKey, `(${now}`, '+inf'),
  ]);
  const u = fields.u === undefined ? undefined : Number(fields.u);
  const held = fields.hw === undefined ? undefined : HOLD_CODES[fields.hw];
  const local = (field: string | undefined) =>
    field === undefined ? undefined : toLocal(Number(field), now);
  return {
    state: u === undefined ? 'closed' : now < u ? 'open' : 'half_open',
    failures: fields.f === undefined ? undefined : Number(fields.f),
    opens: Number(fields.n ?? 0),
    openUntilMs: u === undefined ? undefined : toLocal(u, now),
    openSinceMs: local(fields.s),
    slots,
    held,
    heldSinceMs: held ? local(fields.h) : undefined,
    runFailures: Number(fields.fc ?? 0),
    failingSinceMs: local(fields.fs),
  };
}

async function redisNow(redis: RedisClient): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** `origin_failing_origins`, and `origin_failing_seconds` of the longest held (held is sorted by since). */
function sampleHeldGauges(all: readonly HeldOrigin[]): void {
  // A caller's own hold is counted apart: the origin is not held for the others.
  const held = all.filter((h) => h.client === undefined);
  breakerMetrics.callersHeld.set(all.length - held.length);
  breakerMetrics.heldOrigins.set(held.length);
  breakerMetrics.heldSeconds.reset();
  const now = Date.now();
  for (const h of held.slice(0, MAX_ORIGIN_LABELS))
    breakerMetrics.heldSeconds.set(
      { origin: h.origin, reason: h.reason },
      Math.max(0, (now - h.sinceMs) / 1000),
    );
}

function sampleGauges(open: readonly OpenOrigin[]): void {
  breakerMetrics.openOrigins.set(open.length);
  // The deprecated `breaker_open` carries the same values as `breaker_open_seconds` for one release.
  const gauges = [breakerMetrics.openSeconds, breakerMetrics.open];
  for (const g of gauges) g.reset();
  const now = Date.now();
  const longest = [...open].sort((a, b) => a.openSinceMs - b.openSinceMs).slice(0, MAX_ORIGIN_LABELS);
  for (const o of longest)
    for (const g of gauges) g.set({ origin: o.origin }, Math.max(0, (now - o.openSinceMs) / 1000));
}
