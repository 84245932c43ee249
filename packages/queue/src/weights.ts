/**
 * Clients' weights: a client's share of the leases relative to other clients' (weighted fair
 * share, see `commands/includes/shard.lua`). Each shard keeps its own copy (`shares`), because the
 * lease script may read only its own shard's keys; the copies are written together.
 */
import { RequesterError } from '@requester/shared/errors';
import type { RedisClient } from '@requester/shared/redis';
import { shardKey } from './keys.ts';

/** Shares are relative: beyond this, a client of weight 1 would hardly ever be served. */
export const MAX_CLIENT_WEIGHT = 1000;

/**
 * Writes a client's weight into every shard (one pipelined HSET per shard); weight 1, the
 * default, removes the entry. With every client saturating the queue, a client of weight 3 gets 3
 * leases for each of a weight-1 client's.
 */
export async function writeClientWeight(
  queue: { redis: RedisClient; prefix: string; shards: number },
  client: string,
  weight: number,
): Promise<void> {
  if (!Number.isInteger(weight) || weight < 1 || weight > MAX_CLIENT_WEIGHT) {
    throw new RequesterError(
      'invalid_request',
      `a client weight is an integer from 1 to ${MAX_CLIENT_WEIGHT}, got ${weight}`,
    );
  }
  const { redis, prefix, shards } = queue;
  await Promise.all(
    Array.from({ length: shards }, (_, shard) => {
      const key = shardKey(prefix, shard, 'shares');
      return weight === 1 ? redis.hdel(key, client) : redis.hset(key, client, weight);
    }),
  );
}

/** The clients with a weight other than 1 (read from shard 0; every shard holds the same). */
export async function readClientWeights(queue: {
  redis: RedisClient;
  prefix: string;
}): Promise<Map<string, number>> {
  const all = await queue.redis.hgetall(shardKey(queue.prefix, 0, 'shares'));
  return new Map(Object.entries(all).map(([client, weight]) => [client, Number(weight)]));
}

/** How often ClientWeights reads the weights again: a weight set applies at the origins within it. */
export const WEIGHTS_REFRESH_MS = 5_000;

/**
 * The clients' weights as this process last read them (readClientWeights, every
 * WEIGHTS_REFRESH_MS, one HGETALL): for the order of the waits at a saturated origin, which must
 * share out slots by the same weights the lease does, without a read per task. A read that fails
 * keeps the last weights.
 */
export class ClientWeights {
  private weights = new Map<string, number>();
  private readonly queue: { redis: RedisClient; prefix: string };
  private readonly timer: NodeJS.Timeout;
  /** Resolves once the first read is done (or failed). */
  readonly ready: Promise<void>;

  constructor(queue: { redis: RedisClient; prefix: string }, refreshMs = WEIGHTS_REFRESH_MS) {
    this.queue = queue;
    this.ready = this.refresh();
    this.timer = setInterval(() => void this.refresh(), refreshMs);
    this.timer.unref();
  }

  /** Reads the weights again now (a weight just set, instead of at the next refresh). */
  async refresh(): Promise<void> {
    try {
      this.weights = await readClientWeights(this.queue);
    } catch {
      // Redis away: the last weights hold until a read succeeds.
    }
  }

  /** A client's weight (1 when it has none). */
  weightOf(client: string): number {
    return this.weights.get(client) ?? 1;
  }

  close(): void {
    clearInterval(this.timer);
  }
}
