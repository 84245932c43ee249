import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { Logger } from '../log/index.ts';
import type { RedisClient } from './client.ts';

export { Cluster, Redis } from 'ioredis';
export { type AnnouncementMark, Announcements } from './announcements.ts';
export type { RedisClient } from './client.ts';
export { RedisClock } from './clock.ts';
// The Lua scripts' loader: `@requester/shared/redis` is all a Redis user needs.
export * from './lua.ts';

export interface RedisConnectOptions {
  /** `redis://host:port/db` for one node, or several comma-separated `redis://` seeds for a cluster. */
  url: string;
  /** Treat `url` as cluster seeds even when only one is given. */
  cluster?: boolean;
  /** Per-command timeout: a hung Redis surfaces as an error, never as a stuck worker. */
  commandTimeoutMs?: number;
  connectionName?: string;
  /**
   * Cluster only: how long a command is retried while its slot has no master (a failover), before
   * it fails to the caller.
   */
  failoverRetryMs?: number;
  /**
   * Where connection trouble is reported: one warning when the connection is lost, one info line
   * when it is back. Without it a client with no 'error' listener makes ioredis print every failed
   * reconnect to stderr, outside the JSON logs.
   */
  logger?: Logger;
}

/**
 * The one Redis factory. Commands time out, reconnects back off, and the offline queue is
 * bounded by the command timeout so that callers see failures instead of waiting forever.
 */
export function createRedis(options: RedisConnectOptions): RedisClient {
  const seeds = options.url
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const common: RedisOptions = {
    commandTimeout: options.commandTimeoutMs ?? 5_000,
    connectTimeout: 5_000,
    maxRetriesPerRequest: 2,
    enableAutoPipelining: true,
    retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 2_000),
    ...(options.connectionName ? { connectionName: options.connectionName } : {}),
  };
  const client = connect(seeds, common, options.cluster ?? false, options.failoverRetryMs ?? 6_000);
  if (options.logger) reportOutages(client, options.logger.child({ component: 'redis' }));
  return client;
}

/** How often a cluster client reads the map of slots (CLUSTER SLOTS), whatever happens. */
const SLOTS_REFRESH_MS = 1_000;

/** Redirections a command may take in a cluster: ioredis's default. */
const MAX_REDIRECTIONS = 16;

/** The cluster's retry delays, so that the redirections of one command span about `spanMs`. */
function clusterRetries(spanMs: number): ClusterOptions {
  const delay = Math.max(50, Math.round(spanMs / MAX_REDIRECTIONS));
  return {
    maxRedirections: MAX_REDIRECTIONS,
    retryDelayOnFailover: delay,
    retryDelayOnClusterDown: delay,
    retryDelayOnTryAgain: delay,
  };
}

function connect(
  seeds: string[],
  common: RedisOptions,
  cluster: boolean,
  failoverRetryMs: number,
): RedisClient {
  if (cluster || seeds.length > 1) {
    return new Cluster(
      seeds.map((seed) => {
        const u = new URL(seed);
        return { host: u.hostname, port: Number(u.port || 6379) };
      }),
      {
        redisOptions: { ...common, ...clusterSecurity(seeds[0] ?? '') },
        enableAutoPipelining: true,
        // Writes and scripts only: a replica's copy lags (replication is asynchronous).
        scaleReads: 'master',
        // A failover: the master's connection closes, then the cluster answers CLUSTERDOWN until a
        // replica is promoted (cluster-node-timeout and an election later). Each of these retries
        // re-reads the slots, and the retries span `failoverRetryMs` (REDIS_FAILOVER_RETRY) so that a command rides
        // over a promotion rather than failing to its caller (docs/reliability.md, "Redis failover").
        ...clusterRetries(failoverRetryMs),
        // After a failover, a slot whose master's connection is gone is sent to any node, and the
        // MOVED it answers inside an auto-pipeline of mixed replies is not followed (ioredis) and
        // refreshes nothing: the map of slots would stay stale until something else refreshes it.
        slotsRefreshInterval: SLOTS_REFRESH_MS,
      },
    );
  }
  return new Redis(seeds[0] ?? 'redis://127.0.0.1:6379', common);
}

/**
 * The credentials and TLS of the first seed, for every node of a cluster: the nodes a cluster
 * client discovers have no URL of their own, so `rediss://user:password@seed` must apply to all.
 */
function clusterSecurity(seed: string): RedisOptions {
  const u = new URL(seed);
  return {
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/**
 * What a Redis error means for the operator when the server refused our credentials (Redis's
 * messages never echo them): waiting would not fix it, so the process says so and stops.
 */
export function explainRedisError(err: unknown): string | undefined {
  const message = err instanceof Error ? err.message : '';
  if (/^(WRONGPASS|NOAUTH|NOPERM)\b/.test(message))
    return `Redis refused the credentials in REDIS_URL (password, or ACL user and password): ${message}`;
  return undefined;
}

/**
 * A connection of its own for sharded pub/sub (a subscribed connection serves nothing else). On a
 * cluster its SSUBSCRIBEs go to the node owning each channel's slot, and follow the slot when it moves.
 */
export function redisSubscriber(client: RedisClient, logger?: Logger): RedisClient {
  const subscriber =
    client instanceof Cluster ? client.duplicate([], { shardedSubscribers: true }) : client.duplicate();
  if (logger) reportOutages(subscriber, logger.child({ component: 'redis-subscriber' }));
  return subscriber;
}

/** One warning per outage (ioredis emits an error for every reconnect attempt), one line at recovery. */
function reportOutages(client: RedisClient, log: Logger): void {
  let down = false;
  client.on('error', (err: Error) => {
    if (down) return;
    down = true;
    log.warn({ err }, 'Redis connection lost; reconnecting');
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    log.info('Redis connection restored');
  });
}

/** How a Redis server keeps its data across a restart (CONFIG GET appendonly / save). */
export type RedisPersistence = 'aof' | 'snapshots' | 'none';

/**
 * Reads how each Redis node (each master of a cluster) persists, and warns when a restart would
 * lose queued tasks: docs/architecture.md §7 promises none is lost when a dependency restarts, which holds
 * only for an append-only file. Managed services often refuse CONFIG: then nothing is said.
 */
export async function checkRedisPersistence(client: RedisClient, log: Logger): Promise<RedisPersistence[]> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const found: RedisPersistence[] = [];
  for (const node of nodes) {
    let persistence: RedisPersistence;
    try {
      const [, appendonly] = (await node.config('GET', 'appendonly')) as string[];
      const [, save] = (await node.config('GET', 'save')) as string[];
      persistence = appendonly === 'yes' ? 'aof' : save?.trim() ? 'snapshots' : 'none';
    } catch (err) {
      log.debug({ err }, 'cannot read the Redis persistence settings (CONFIG refused?)');
      continue;
    }
    found.push(persistence);
    const at = `${node.options.host}:${node.options.port}`;
    if (persistence === 'none') {
      log.warn(
        { redis: at },
        'Redis persists nothing: a restart loses every queued task (run it with appendonly yes)',
      );
    } else if (persistence === 'snapshots') {
      log.warn(
        { redis: at },
        'Redis keeps RDB snapshots only: a crash loses the tasks queued since the last one (run it with appendonly yes)',
      );
    }
  }
  return found;
}
