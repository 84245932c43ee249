import { Cluster, type RedisClient } from '@requester/shared/redis';
import type { Fence } from './route.ts';

/**
 * How long after its due time a fence lapses on its own: a fence whose last record never comes
 * back (a row deleted by hand, a relayed copy Kafka refused) must not hold its partition forever.
 * Well beyond a relay's lateness under a lapsed claim (RELAY_STAGE_AHEAD + its lease, 90 s by
 * default); a relay behind by more than this lets the fence lapse, and order is as without one.
 */
export const FENCE_GRACE_MS = 10 * 60_000;

/**
 * The fences of ordered partitions in Redis (see fenceRoute), one key per queue partition (client
 * scope included), `<prefix>:fence:<partition>` = `{"d":dueAt,"l":lastTaskId}`, expiring
 * FENCE_GRACE_MS after its due time. Shared by all routers: a Kafka partition of `in` moves between
 * them on a rebalance. No script: the records of one queue partition are on one Kafka partition of
 * `in` (its key), whose batches one router handles one after the other, so a fence has one writer
 * at a time.
 */
export class Fences {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #graceMs: number;

  /** `prefix`: REDIS_PREFIX. */
  constructor(redis: RedisClient, prefix: string, graceMs = FENCE_GRACE_MS) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#graceMs = graceMs;
  }

  key(partition: string): string {
    return `${this.#prefix}:fence:${partition}`;
  }

  /** The fences of these partitions (absent: none), one MGET (one GET per key on a cluster). */
  async read(partitions: readonly string[]): Promise<Map<string, Fence>> {
    const fences = new Map<string, Fence>();
    if (partitions.length === 0) return fences;
    const keys = partitions.map((partition) => this.key(partition));
    const texts =
      this.#redis instanceof Cluster
        ? await Promise.all(keys.map((key) => this.#redis.get(key)))
        : await this.#redis.mget(keys);
    partitions.forEach((partition, i) => {
      const fence = parseFence(texts[i] ?? null);
      if (fence) fences.set(partition, fence);
    });
    return fences;
  }

  /** Sets (a fence) or clears (undefined) each partition's fence, sent together. */
  async write(updates: ReadonlyMap<string, Fence | undefined>): Promise<void> {
    const now = Date.now();
    await Promise.all(
      [...updates].map(([partition, fence]) => {
        const key = this.key(partition);
        const expiresAt = fence && Math.round(fence.dueAt + this.#graceMs);
        if (!fence || expiresAt === undefined || expiresAt <= now) return this.#redis.del(key);
        return this.#redis.set(key, JSON.stringify({ d: fence.dueAt, l: fence.last }), 'PXAT', expiresAt);
      }),
    );
  }
}

/** A stored fence; anything else (not JSON, another shape) is no fence. */
function parseFence(text: string | null): Fence | undefined {
  if (text === null) return undefined;
  try {
    const { d, l } = JSON.parse(text) as { d?: unknown; l?: unknown };
    return typeof d === 'number' && Number.isFinite(d) && typeof l === 'string'
      ? { dueAt: d, last: l }
      : undefined;
  } catch {
    return undefined;
  }
}
