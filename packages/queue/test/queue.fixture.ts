import { randomBytes } from 'node:crypto';
import { clientCapKeys, shardKey } from '../src/keys.ts';
import type { FairQueue } from '../src/queue.ts';
import type { LeasedTask } from '../src/types.ts';

/** A key prefix of its own per test, so test files may share one Redis. */
export function uniquePrefix(): string {
  return `t:${randomBytes(6).toString('hex')}:`;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Makes leases already expired (deadline 0) without waiting — the "worker died long ago" of the
 * model tests. Only the given tokens, or every lease of the queue.
 */
export async function expireLeases(queue: FairQueue, tokens?: readonly string[]): Promise<void> {
  await Promise.all(
    Array.from({ length: queue.shards }, async (_, shard) => {
      const key = shardKey(queue.prefix, shard, 'leases');
      const members = tokens ?? (await queue.redis.zrange(key, 0, -1));
      for (const token of members) await queue.redis.zadd(key, 'XX', 0, token);
    }),
  );
}

/**
 * Expires the cap slots that `owner` (the queue object that leased them) holds for these tokens,
 * as if their holder had died long ago (see `expireLeases`).
 */
export async function expireCapSlots(owner: FairQueue, tokens: readonly string[]): Promise<void> {
  for (const token of tokens) {
    const slot = owner.capSlotOf(token);
    if (slot) await owner.redis.zadd(clientCapKeys(owner.prefix, slot.client).held, 'XX', 0, slot.permit);
  }
}

/** Leases until nothing is left that is due now; returns everything leased, in lease order. */
export async function leaseAll(queue: FairQueue, k: number, leaseMs = 30_000): Promise<LeasedTask[]> {
  const all: LeasedTask[] = [];
  for (;;) {
    const { tasks } = await queue.lease(k, leaseMs);
    if (tasks.length === 0) return all;
    all.push(...tasks);
  }
}
