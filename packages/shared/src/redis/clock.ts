import type { RedisClient } from './client.ts';

/** How often the offset is read again: host clocks drift by milliseconds a minute at most. */
const RESYNC_MS = 10_000;

/**
 * Redis's clock as seen from this process: this host's `Date.now()` plus its offset from Redis's
 * `TIME`, read at `sync()` and again every 10 s while `now()` is asked. The scripts (due times,
 * leases, limiter windows) decide on Redis's clock; a decision made in the process, such as a
 * start-by deadline, reads this one so that a host whose clock is seconds off decides as they do.
 * Off by at most half the round trip of the last read (and 0 before the first).
 */
export class RedisClock {
  readonly #redis: Pick<RedisClient, 'time'>;
  #offsetMs = 0;
  #syncedAt = Number.NEGATIVE_INFINITY;
  #syncing: Promise<void> | undefined;

  constructor(redis: Pick<RedisClient, 'time'>) {
    this.#redis = redis;
  }

  /** Epoch ms on Redis's clock. A stale offset is read again in the background, never awaited. */
  now(): number {
    if (performance.now() - this.#syncedAt >= RESYNC_MS) void this.sync().catch(() => undefined);
    return Date.now() + this.#offsetMs;
  }

  /** How far Redis's clock is ahead of this host's (ms; negative when behind). */
  get offsetMs(): number {
    return this.#offsetMs;
  }

  /** Reads Redis's TIME once; the local instant is taken halfway through the round trip. */
  sync(): Promise<void> {
    this.#syncing ??= this.#read().finally(() => {
      this.#syncing = undefined;
    });
    return this.#syncing;
  }

  async #read(): Promise<void> {
    const sent = performance.now();
    const localAtSend = Date.now();
    const [seconds, micros] = await this.#redis.time();
    const roundTrip = performance.now() - sent;
    const redisMs = Number(seconds) * 1_000 + Number(micros) / 1_000;
    this.#offsetMs = Math.round(redisMs - (localAtSend + roundTrip / 2));
    this.#syncedAt = performance.now();
  }
}
