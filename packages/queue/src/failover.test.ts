import { createRedis, type RedisClient } from '@requester/shared/redis';
import {
  clusterRoles,
  redisServerAvailable,
  startRedisCluster,
  type TestCluster,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cutReplication,
  infoField,
  inSync,
  Load,
  loadTasks,
  masterOfKey,
  promoted,
  replicaOf,
} from '../test/failover.fixture.ts';
import { uniquePrefix } from '../test/queue.fixture.ts';
import { QueueAdmin } from './admin.ts';
import { shardKey } from './keys.ts';
import { FairQueue } from './queue.ts';
import type { FairQueueOptions, PublishTask } from './types.ts';

/**
 * Redis failover under load (docs/reliability.md, "Redis failover"): a 3-master Redis Cluster with
 * a replica per master (real redis-server processes on free ports), the queue publishing, leasing
 * and acking a few thousand tasks over many partitions (some ordered), and a master killed with
 * `kill -9`. Redis replicates asynchronously; the test widens that window deterministically (the
 * master's replica link is cut just before the kill, see `cutReplication`), so that what a failover
 * can lose is lost every run, and shows: the queue carries on after the promotion; the loss is
 * tasks acknowledged to the publisher and absent from the promoted replica; `verify` does not see
 * it (the replica holds a consistent prefix of its master's writes); publishing the acknowledged
 * tasks again (what re-reading `in` does) brings exactly those back; and with
 * QUEUE_PUBLISH_REPLICAS (`WAIT`) nothing acknowledged is lost. A last case kills a master with
 * its replica link healthy and the workers busy: whatever is lost, the replay brings back.
 */
const haveRedisServer = redisServerAvailable();
const TASKS = Number(process.env.FAILOVER_TASKS ?? 2_000);
const SHARDS = 16;
/** Rounds of the cost of WAIT. */
const ROUNDS = 6;

describe.skipIf(!haveRedisServer)('Redis failover under load', () => {
  let cluster: TestCluster;
  let redis: RedisClient;

  beforeAll(async () => {
    cluster = await startRedisCluster(7300, { replicas: 1, nodeTimeoutMs: 2_000 });
    redis = createRedis({ url: cluster.url, cluster: true, failoverRetryMs: 6_000 });
  }, 90_000);

  afterAll(async () => {
    redis?.disconnect();
    await cluster?.stop();
  }, 60_000);

  const newQueue = (options: Partial<FairQueueOptions> = {}) =>
    new FairQueue({ redis, prefix: uniquePrefix(), shards: SHARDS, notify: false, ...options });

  /** A master that still has a replica (a promoted one has none), and that replica. */
  async function victim(): Promise<{ master: number; replica: number; pid: number }> {
    let roles = new Map<number, 'master' | 'replica'>();
    // The first node that answers (a killed one does not).
    for (const node of cluster.nodes) {
      roles = await clusterRoles(node.port);
      if (roles.size) break;
    }
    for (const [port, role] of roles) {
      if (role !== 'master') continue;
      if (!(Number(await infoField(port, 'replication', 'connected_slaves')) >= 1)) continue;
      const pid = cluster.nodes.find((n) => n.port === port)?.pid ?? 0;
      return { master: port, replica: await replicaOf(port), pid };
    }
    throw new Error('no master with a replica left');
  }

  interface Outcome {
    lost: string[];
    lostOutsideWindow: string[];
    windowOnVictim: number;
    promotedMs: number;
    carriedOnMs: number;
    replicaBackMs: number;
    violations: string[];
    replayQueued: Set<string>;
    missingAfterReplay: number;
    repeated: number;
    outOfOrder: number;
    publishFailures: number;
  }

  /**
   * The load, the cut (unless `cut` is false: the kill then meets the replica wherever it is,
   * workers busy), the kill, the promotion, the drain, verify, the replay.
   */
  async function failover(queue: FairQueue, tag: string, cut = true): Promise<Outcome> {
    const tasks = loadTasks(tag, TASKS);
    const before = tasks.slice(0, Math.floor(TASKS * 0.4));
    const window = tasks.slice(before.length, before.length + Math.floor(TASKS * 0.1));
    const after = tasks.slice(before.length + window.length);
    const load = new Load(queue);
    load.startWorkers(3);
    try {
      await load.publish(before);
      const { master, replica, pid } = await victim();
      const victimShards = new Set<number>();
      for (let shard = 0; shard < SHARDS; shard++) {
        if ((await masterOfKey(redis, shardKey(queue.prefix, shard, 'pending'))) === master)
          victimShards.add(shard);
      }
      expect(victimShards.size).toBeGreaterThan(0);
      const onVictim = (task: PublishTask) => victimShards.has(queue.shardOf(task.partition ?? task.id));

      // The window: workers paused (so that nothing published in it is leased before the kill),
      // the replica cut off, each batch published once.
      if (cut) {
        await load.pause();
        await cutReplication(master, replica);
      }
      const unconfirmed: PublishTask[] = [];
      for (let at = 0; at < window.length; at += 50) {
        const chunk = window.slice(at, at + 50);
        if (!(await load.publishOnce(chunk))) unconfirmed.push(...chunk);
      }
      const windowOnVictim = new Set(
        window.filter((t) => load.acknowledged.has(t.id) && onVictim(t)).map((t) => t.id),
      );

      const killedAt = Date.now();
      process.kill(pid, 'SIGKILL');
      load.resume();
      load.mark();
      // The publisher carries on (retrying what fails) while the replica is promoted and the killed
      // node, started again empty, rejoins as its replica (what an operator or a pod restart does).
      const rest = [...unconfirmed, ...after];
      expect(rest.slice(0, 50).some(onVictim)).toBe(true);
      const publishing = load.publish(rest, 50, Date.now() + 75_000);
      await promoted(cluster, replica);
      const promotedMs = Date.now() - killedAt;
      await cluster.restart(master);
      await inSync(master);
      const replicaBackMs = Date.now() - killedAt;
      await publishing;
      const carriedOnMs = (load.firstAckAfterMark ?? Number.NaN) - killedAt;
      await load.drained();

      const lost = load.missing();
      const { violations } = await new QueueAdmin(queue).verify();
      const firstOrder = outOfOrderPartitions(load.orderSeen);

      // Recovery: publish every acknowledged task again, in order, as a router re-reading `in`
      // from before the failover does; ids the queue still holds, or acked within the dedup
      // window, are refused as duplicates.
      const replayQueued = new Set<string>();
      const acknowledged = tasks.filter((t) => load.acknowledged.has(t.id));
      for (let at = 0; at < acknowledged.length; at += 100) {
        const chunk = acknowledged.slice(at, at + 100);
        const results = await queue.publish(chunk);
        chunk.forEach((t, i) => {
          if (results[i] === 'queued') replayQueued.add(t.id);
        });
      }
      await load.drained();
      return {
        lost,
        lostOutsideWindow: lost.filter((id) => !windowOnVictim.has(id)),
        windowOnVictim: windowOnVictim.size,
        promotedMs,
        carriedOnMs,
        replicaBackMs,
        violations: [
          ...violations,
          ...firstOrder.map((p) => `ordered partition ${p} out of order before the replay`),
        ],
        replayQueued,
        missingAfterReplay: load.missing().length,
        repeated: load.repeated(),
        outOfOrder: outOfOrderPartitions(load.orderSeen).length,
        publishFailures: load.publishFailures,
      };
    } finally {
      await load.stop();
      await queue.close();
    }
  }

  it('costs of WAIT after publish, on the healthy cluster', async () => {
    const plain = newQueue();
    const waiting = newQueue({ publishReplicas: { replicas: 1, timeoutMs: 1_000 } });
    const spent = { plain: 0, waiting: 0 };
    // A warm-up round (scripts loaded, connections open) not counted, then rounds in turn, the
    // order swapped each round, so that a busier moment of the box falls on both alike.
    for (let round = 0; round <= ROUNDS; round++) {
      const order = round % 2 === 0 ? (['plain', 'waiting'] as const) : (['waiting', 'plain'] as const);
      for (const name of order) {
        const queue = name === 'plain' ? plain : waiting;
        const tasks = loadTasks(`cost-${name}-${round}`, 1_000);
        const started = performance.now();
        for (let at = 0; at < tasks.length; at += 50) await queue.publish(tasks.slice(at, at + 50));
        if (round > 0) spent[name] += performance.now() - started;
      }
    }
    console.log(
      `publish of ${ROUNDS} × 1,000 tasks in batches of 50 (${SHARDS} shards): ${spent.plain.toFixed(0)} ms without WAIT, ` +
        `${spent.waiting.toFixed(0)} ms with WAIT 1 (× ${(spent.waiting / spent.plain).toFixed(2)})`,
    );
    expect(spent.waiting).toBeGreaterThan(0);
  }, 90_000);

  it('with QUEUE_PUBLISH_REPLICAS, a master killed under load loses nothing acknowledged', async () => {
    const queue = newQueue({ publishReplicas: { replicas: 1, timeoutMs: 300 } });
    const outcome = await failover(queue, 'wait');
    report('WAIT 1', outcome);
    // The window's batches touched the cut-off master: WAIT found no replica, the publish failed
    // and was published again after the promotion.
    expect(outcome.publishFailures).toBeGreaterThan(0);
    expect(outcome.lost).toEqual([]);
    expect(outcome.violations).toEqual([]);
    expect(outcome.missingAfterReplay).toBe(0);
  }, 90_000);

  it('without it, the tasks acknowledged since the replica last had its master are lost; verify passes; a replay brings them back', async () => {
    const queue = newQueue();
    const outcome = await failover(queue, 'plain');
    report('no WAIT', outcome);
    expect(outcome.windowOnVictim).toBeGreaterThan(0);
    // Exactly what the cut-off master acknowledged and no replica had: every such task.
    expect(outcome.lost.length).toBe(outcome.windowOnVictim);
    expect(outcome.lostOutsideWindow).toEqual([]);
    // The promoted replica holds a consistent prefix of its master's writes: nothing for verify to see.
    expect(outcome.violations).toEqual([]);
    for (const id of outcome.lost) expect(outcome.replayQueued.has(id)).toBe(true);
    expect(outcome.missingAfterReplay).toBe(0);
  }, 90_000);

  it('a master killed with its replica link healthy, workers busy: the queue carries on, the replay leaves nothing missing', async () => {
    // With wake announcements: their sharded subscriber rides over the failover too.
    const queue = newQueue({ notify: true });
    const outcome = await failover(queue, 'live', false);
    report('no WAIT, no cut', outcome);
    expect(outcome.violations).toEqual([]);
    for (const id of outcome.lost) expect(outcome.replayQueued.has(id)).toBe(true);
    expect(outcome.missingAfterReplay).toBe(0);
  }, 90_000);
});

/** Ordered partitions whose first deliveries are not in publish order. */
function outOfOrderPartitions(orderSeen: Map<string, string[]>): string[] {
  const broken: string[] = [];
  for (const [partition, ids] of orderSeen) {
    const seen = new Set<string>();
    let last = -1;
    for (const id of ids) {
      if (seen.has(id)) continue;
      seen.add(id);
      const index = Number(id.slice(id.lastIndexOf('-') + 1));
      if (index < last) {
        broken.push(partition);
        break;
      }
      last = index;
    }
  }
  return broken;
}

function report(
  name: string,
  o: {
    lost: string[];
    windowOnVictim: number;
    promotedMs: number;
    carriedOnMs: number;
    replicaBackMs: number;
    replayQueued: Set<string>;
    repeated: number;
    outOfOrder: number;
    publishFailures: number;
  },
): void {
  console.log(
    `${name}: ${TASKS} tasks; acknowledged on the killed master in the window ${o.windowOnVictim}; ` +
      `lost ${o.lost.length}; replay queued again ${o.replayQueued.size}; leased more than once ${o.repeated}; ` +
      `ordered partitions out of order after the replay ${o.outOfOrder}; failed publishes ${o.publishFailures}; ` +
      `after the kill: replica promoted (cluster ok) ${o.promotedMs} ms, first publish acknowledged ${o.carriedOnMs} ms, ` +
      `killed node back as a replica in sync ${o.replicaBackMs} ms`,
  );
}
