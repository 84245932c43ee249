import { RequesterError } from '@requester/shared/errors';
import type { RedisClient } from '@requester/shared/redis';

/**
 * Redis replicates asynchronously: a publish its master acknowledged is lost if the master dies
 * before a replica has it, and the replica is promoted (docs/reliability.md, "Redis failover").
 * With `replicas` > 0, a publish is confirmed only once that many replicas of each shard's master
 * have its writes (`WAIT`); otherwise it fails, and the caller publishes again (publish is
 * idempotent by task id), as after any other Redis error.
 */
export interface ReplicaConfirmation {
  /** Replicas that must have a publish before it is confirmed; 0 = no wait. */
  replicas: number;
  /** How long `WAIT` waits for them. */
  timeoutMs: number;
}

/**
 * Waits until `replicas` replicas of the node of each shard have every write this client sent
 * there so far. WAIT takes no key: it rides in a pipeline with a read of one of the shard's keys,
 * which sends it to the shard's master on the connection the publish used (a cluster client keeps
 * one per node), so it covers that publish.
 */
export async function confirmReplicas(
  redis: RedisClient,
  shardKeys: readonly string[],
  confirmation: ReplicaConfirmation,
): Promise<void> {
  if (confirmation.replicas <= 0 || shardKeys.length === 0) return;
  const acks = await Promise.all(
    shardKeys.map(async (key) => {
      const replies = await redis
        .pipeline()
        .exists(key)
        .wait(confirmation.replicas, confirmation.timeoutMs)
        .exec();
      const [err, reached] = replies?.[1] ?? [new Error('no reply to WAIT'), 0];
      if (err) throw err;
      return Number(reached);
    }),
  );
  const fewest = Math.min(...acks);
  if (fewest < confirmation.replicas) {
    throw new RequesterError(
      'dependency_unavailable',
      `publish reached ${fewest} of ${confirmation.replicas} Redis replicas within ${confirmation.timeoutMs} ms (QUEUE_PUBLISH_REPLICAS): not confirmed, publish again`,
    );
  }
}
