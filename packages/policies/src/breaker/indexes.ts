import type { RedisClient } from '@requester/shared/redis';
import { heldIndexKey, openCallersIndexKey } from './keys.ts';
import { ofHeldMember } from './replies.ts';
import type { BreakerState, HoldChange } from './types.ts';

/**
 * The listings' indexes (keys.ts) live in their own slot, so the client keeps them after a script
 * reports a change, not the scripts: best effort, repaired when listed. These throw on a Redis
 * error; the breaker fails open on it.
 */

/** Bound on each index: origins are user input. */
const MAX_INDEXED = 10_000;

/** Keeps an open index (origins', or callers') after a transition. */
export async function indexTransition(
  redis: RedisClient,
  index: string,
  member: string,
  to: BreakerState,
  untilRedisMs: number,
): Promise<void> {
  if (to === 'closed') {
    await redis.zrem(index, member);
    return;
  }
  await redis.zadd(index, untilRedisMs, member);
  await redis.zremrangebyrank(index, 0, -(MAX_INDEXED + 1));
}

/** Keeps the held index after a hold began or ended. */
export async function indexHold(
  redis: RedisClient,
  index: string,
  member: string,
  kind: HoldChange['kind'],
  sinceRedisMs: number,
): Promise<void> {
  if (kind === 'ended') await redis.zrem(index, member);
  else {
    await redis.zadd(index, sinceRedisMs, member);
    await redis.zremrangebyrank(index, MAX_INDEXED, -1);
  }
}

/**
 * Unlists the callers' open and held states of `origin` (a member each), on a reset; those of
 * forgotten states are repaired when listed.
 */
export async function unlistCallers(redis: RedisClient, prefix: string, origin: string): Promise<void> {
  for (const index of [heldIndexKey(prefix), openCallersIndexKey(prefix)]) {
    const listed = await redis.zrange(index, 0, MAX_INDEXED);
    const mine = listed.filter((member) => ofHeldMember(member).origin === origin && member !== origin);
    if (mine.length > 0) await redis.zrem(index, ...mine);
  }
}
