import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { RedisClient } from '@requester/shared/redis';
import { clusterRoles, eventually, type TestCluster } from '@requester/shared/testing';
import { shardKey } from '../src/keys.ts';
import type { FairQueue } from '../src/queue.ts';
import type { PublishTask } from '../src/types.ts';
import { sleep } from './queue.fixture.ts';

const run = promisify(execFile);

/** One redis-cli command against a node of the test's cluster; '' when it does not answer. */
export async function cli(port: number, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run('/usr/bin/redis-cli', ['-p', String(port), ...args]);
    return stdout.trim();
  } catch {
    return '';
  }
}

/** A field of `INFO <section>` of a node. */
export async function infoField(port: number, section: string, field: string): Promise<string | undefined> {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(await cli(port, 'INFO', section))?.[1]?.trim();
}

/**
 * The tasks of a load: `count` tasks over 120 unordered partitions of 4 clients and 24 ordered
 * partitions (every fifth task), in publish order.
 */
export function loadTasks(tag: string, count: number): PublishTask[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `${tag}-${i}`,
    partition: i % 5 === 0 ? `!${tag}-o${i % 24}` : `${tag}-u${i % 120} @c${i % 4}`,
    payload: String(i),
  }));
}

/**
 * The queue under load: a publisher that publishes batches and retries a batch that failed (as
 * the router does: its `in` offsets are committed only after the publish), and workers that lease
 * and ack. It records what the publisher was told and what the workers were handed.
 */
export class Load {
  /** Task ids whose publish returned (queued or duplicate): acknowledged to the publisher. */
  readonly acknowledged = new Set<string>();
  /** How many times each id was leased. */
  readonly deliveries = new Map<string, number>();
  /** Ordered partition → ids in lease order. */
  readonly orderSeen = new Map<string, string[]>();
  /** Publishes that failed (Redis error, or not confirmed by replicas). */
  publishFailures = 0;
  /** Lease or ack calls that failed. */
  workerFailures = 0;
  private inHand = 0;
  private paused = false;
  private busy = 0;
  private stopped = false;
  private readonly workers: Promise<void>[] = [];
  private markedAt = 0;
  /** When the first publish after `mark()` was acknowledged. */
  firstAckAfterMark: number | undefined;
  readonly queue: FairQueue;
  private readonly leaseMs: number;

  constructor(queue: FairQueue, leaseMs = 3_000) {
    this.queue = queue;
    this.leaseMs = leaseMs;
  }

  /** From now on, note the first acknowledged publish. */
  mark(): void {
    this.markedAt = Date.now();
    this.firstAckAfterMark = undefined;
  }

  /** Starts `n` worker loops. */
  startWorkers(n: number): void {
    for (let i = 0; i < n; i++) this.workers.push(this.work());
  }

  private async work(): Promise<void> {
    while (!this.stopped) {
      if (this.paused) {
        await sleep(20);
        continue;
      }
      this.busy++;
      try {
        const { tasks } = await this.queue.lease(25, this.leaseMs);
        this.inHand += tasks.length;
        for (const task of tasks) {
          this.deliveries.set(task.id, (this.deliveries.get(task.id) ?? 0) + 1);
          if (task.ordered) {
            const seen = this.orderSeen.get(task.partition) ?? [];
            seen.push(task.id);
            this.orderSeen.set(task.partition, seen);
          }
        }
        try {
          if (tasks.length) await this.queue.ackMany(tasks.map((t) => t.token));
        } finally {
          this.inHand -= tasks.length;
        }
        if (tasks.length === 0) await sleep(20);
      } catch {
        this.workerFailures++;
        await sleep(100);
      } finally {
        this.busy--;
      }
    }
  }

  /** Workers stop leasing; resolves once none is inside a lease or ack. */
  async pause(): Promise<void> {
    this.paused = true;
    await eventually(() => this.busy === 0, 30_000, 'workers paused');
  }

  resume(): void {
    this.paused = false;
  }

  /** Publishes in batches of `batch`; a failed batch is tried again until `deadline`. */
  async publish(tasks: readonly PublishTask[], batch = 50, retryUntil = Date.now() + 60_000): Promise<void> {
    for (let at = 0; at < tasks.length; at += batch) {
      const chunk = tasks.slice(at, at + batch);
      for (;;) {
        if (await this.publishOnce(chunk)) break;
        if (Date.now() > retryUntil) throw new Error('publish kept failing');
        await sleep(100);
      }
    }
  }

  /** One publish call; true when acknowledged. */
  async publishOnce(tasks: readonly PublishTask[]): Promise<boolean> {
    try {
      await this.queue.publish(tasks);
      for (const task of tasks) this.acknowledged.add(task.id);
      if (this.markedAt && this.firstAckAfterMark === undefined) this.firstAckAfterMark = Date.now();
      return true;
    } catch {
      this.publishFailures++;
      return false;
    }
  }

  /** Waits until nothing is pending, leased or in a worker's hand. */
  async drained(timeoutMs = 60_000): Promise<void> {
    const leasedCount = async () => {
      let n = 0;
      for (let shard = 0; shard < this.queue.shards; shard++) {
        n += await this.queue.redis.zcard(shardKey(this.queue.prefix, shard, 'leases'));
      }
      return n;
    };
    await eventually(
      async () => this.inHand === 0 && (await this.queue.pendingDepth()) === 0 && (await leasedCount()) === 0,
      timeoutMs,
      'queue drained',
    );
  }

  /** Acknowledged ids never leased. */
  missing(): string[] {
    return [...this.acknowledged].filter((id) => !this.deliveries.has(id));
  }

  /** Ids leased more than once. */
  repeated(): number {
    let n = 0;
    for (const count of this.deliveries.values()) if (count > 1) n++;
    return n;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.workers);
  }
}

/** The master port that serves a key (CLUSTER KEYSLOT, then CLUSTER SLOTS), asked of `port`. */
export async function masterOfKey(redis: RedisClient, key: string): Promise<number> {
  const slot = Number(await redis.call('CLUSTER', 'KEYSLOT', key));
  const ranges = (await redis.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (!range) throw new Error(`no node serves slot ${slot}`);
  return Number(range[2][1]);
}

/** The replica port of a master, by its `INFO replication`. */
export async function replicaOf(master: number): Promise<number> {
  const slave0 = (await infoField(master, 'replication', 'slave0')) ?? '';
  const port = Number(/port=(\d+)/.exec(slave0)?.[1]);
  if (!port) throw new Error(`master ${master} has no replica`);
  return port;
}

/**
 * Opens the window that asynchronous replication leaves, deterministically: once the replica has
 * every write so far, the master drops its replica link and refuses new connections (maxclients 1:
 * the replica cannot resync), so whatever it acknowledges from now on exists on the master only.
 */
export async function cutReplication(master: number, replica: number): Promise<void> {
  const offset = Number(await infoField(master, 'replication', 'master_repl_offset'));
  await eventually(
    async () => Number(await infoField(replica, 'replication', 'slave_repl_offset')) >= offset,
    30_000,
    `replica ${replica} caught up with ${master}`,
  );
  // One session: once maxclients is 1, no new connection gets in, this one's either.
  await run('/bin/sh', [
    '-c',
    `printf 'CONFIG SET maxclients 1\\nCLIENT KILL TYPE replica\\n' | /usr/bin/redis-cli -p ${master}`,
  ]);
  await eventually(
    async () => (await infoField(replica, 'replication', 'master_link_status')) === 'down',
    30_000,
    `replica ${replica} cut from ${master}`,
  );
}

/** Waits until the node of `port` is a replica with its link to its master up. */
export async function inSync(port: number, timeoutMs = 60_000): Promise<void> {
  await eventually(
    async () => (await infoField(port, 'replication', 'master_link_status')) === 'up',
    timeoutMs,
    `node ${port} a replica in sync`,
  );
}

/** Waits until `replica` is a master and every node that answers says cluster_state:ok. */
export async function promoted(cluster: TestCluster, replica: number, timeoutMs = 60_000): Promise<void> {
  await eventually(
    async () => {
      if ((await clusterRoles(replica)).get(replica) !== 'master') return false;
      for (const node of cluster.nodes) {
        const info = await cli(node.port, 'CLUSTER', 'INFO');
        if (info && !info.includes('cluster_state:ok')) return false;
      }
      return true;
    },
    timeoutMs,
    `replica ${replica} promoted`,
  );
}
