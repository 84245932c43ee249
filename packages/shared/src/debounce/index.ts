/**
 * Debounce (`meta.debounce`, docs/architecture.md glossary): the state of each debounce key in
 * Redis, shared by the routers (which put a request off to the end of its burst) and the
 * executors (which run only the latest request of a burst and end the others `debounced`).
 *
 * @module
 */

import { clientScoped, type ErrorResultExtra, errorResult, type ResultEnvelope } from '../contract/index.ts';
import type { RedisClient } from '../redis/index.ts';
import { durationToMs } from '../time/index.ts';

/**
 * How long a key's state outlives its latest request's due time: a superseded task read later than
 * this (an executor far behind) finds no state and runs (fail open), as when Redis is away.
 */
export const DEBOUNCE_GRACE_MS = 10 * 60_000;

/**
 * A request entering its key's burst. The burst is new when the key has none, when its latest
 * already ran, or when its latest is due (a request arriving after maxWait, or after the delay,
 * while the latest waits for a worker): that latest is then owed its run (`owed:<id>`), and this
 * request starts the next burst. A record of the same Kafka partition of `in` at an earlier
 * offset than the latest's is a replay: it is superseded already (due now, it ends debounced). A
 * replay of the latest keeps its due time. Returns {due, previous latest or ''}.
 */
const ENTER_LUA = `
local key = KEYS[1]
local id, now, delay, maxWait = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local arr, part, off, grace = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local h = redis.call('HMGET', key, 'latest', 'first', 'due', 'ran', 'arr', 'part', 'off')
local latest, first, due, ran = h[1], tonumber(h[2]), tonumber(h[3]), h[4]
if latest == id then return {tostring(due), latest} end
if latest then
  local larr = tonumber(h[5])
  if arr < larr or (arr == larr and h[6] == part and off < tonumber(h[7])) then
    return {tostring(math.max(now, due)), latest}
  end
end
if not latest or ran == '1' or now >= due then
  if latest and ran ~= '1' then redis.call('HSET', key, 'owed:' .. latest, '1') end
  first = now
end
local newDue = now + delay
if maxWait > 0 and first + maxWait < newDue then newDue = first + maxWait end
redis.call('HSET', key, 'latest', id, 'first', first, 'due', newDue, 'ran', '0', 'arr', arr, 'part', part, 'off', off)
redis.call('PEXPIRE', key, newDue - now + grace)
return {tostring(newDue), latest or ''}
`;

/**
 * A task of the key come due: the latest of its burst (marked ran, so a later request starts a new
 * burst), or a latest owed its run, goes on ('' returned); so does one whose key has no state (it
 * lapsed: fail open). Any other was replaced: the latest's requestId is returned.
 */
const CHECK_LUA = `
local key = KEYS[1]
local id = ARGV[1]
local latest = redis.call('HGET', key, 'latest')
if not latest then return '' end
if latest == id then
  redis.call('HSET', key, 'ran', '1')
  return ''
end
if redis.call('HDEL', key, 'owed:' .. id) == 1 then return '' end
return latest
`;

/** `meta.debounce` as parsed by the contract. */
export interface DebounceSpec {
  key: string;
  delay: string;
  maxWait?: string | undefined;
}

/** When a request entering a burst arrived (its acceptance), and where its record sits in `in`. */
export interface DebounceSeat {
  /** Epoch ms. */
  arrivedAt: number;
  partition: number;
  offset: string;
}

/**
 * The debounce keys in Redis, `<prefix>:debounce:{<key in the client's namespace>}`: a hash of the
 * burst's latest requestId, its first arrival, the latest's due time, whether it ran, and the
 * records owed a run. One script per step, so that routers and executors never race on a key.
 */
export class Debounces {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #graceMs: number;

  /** `prefix`: REDIS_PREFIX. */
  constructor(redis: RedisClient, prefix: string, graceMs = DEBOUNCE_GRACE_MS) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#graceMs = graceMs;
  }

  key(client: string | undefined, key: string): string {
    return `${this.#prefix}:debounce:{${clientScoped(client, key)}}`;
  }

  /**
   * Enters a request into its key's burst at `now`: its due time (the end of the burst as it
   * stands), and the request it replaces as the latest ('' when none).
   */
  async enter(
    client: string | undefined,
    requestId: string,
    spec: DebounceSpec,
    now: number,
    seat: DebounceSeat = { arrivedAt: now, partition: -1, offset: '-1' },
  ): Promise<{ dueAt: number; replaced: string }> {
    const delayMs = Math.max(1, durationToMs(spec.delay));
    const maxWaitMs = spec.maxWait === undefined ? 0 : Math.max(1, durationToMs(spec.maxWait));
    const answer = (await this.#redis.eval(
      ENTER_LUA,
      1,
      this.key(client, spec.key),
      requestId,
      String(Math.round(now)),
      String(delayMs),
      String(maxWaitMs),
      String(Math.round(seat.arrivedAt)),
      String(seat.partition),
      seat.offset,
      String(this.#graceMs),
    )) as [string, string];
    const replaced = String(answer[1] ?? '');
    return { dueAt: Number(answer[0]), replaced: replaced === requestId ? '' : replaced };
  }

  /** Whether a due task of the key runs (undefined) or was replaced (the latest's requestId). */
  async replacedBy(client: string | undefined, requestId: string, key: string): Promise<string | undefined> {
    const answer = await this.#redis.eval(CHECK_LUA, 1, this.key(client, key), requestId);
    const latest = String(answer ?? '');
    return latest === '' ? undefined : latest;
  }
}

/**
 * The one result of a request a newer one of its debounce key replaced: status 409,
 * `meta.error.code` `debounced`, and `meta.debounced.by` naming the replacing request.
 */
export function debouncedResult(
  requestId: string,
  by: string,
  key: string,
  extra: Pick<ErrorResultExtra, 'tryCount' | 'waitTimeNs' | 'proxyData'> = {},
): ResultEnvelope {
  const message = `replaced by request ${by}, a newer one of debounce key ${key} (meta.debounce): not executed`;
  const result = errorResult(requestId, 'debounced', message, extra);
  return { ...result, meta: { ...result.meta, debounced: { by } } };
}
