import { Cluster, Redis, type RedisOptions } from 'ioredis';

export { Cluster, Redis } from 'ioredis';
/** Either a single Redis node or a Redis Cluster: every module takes this, never a concrete class. */
export type RedisClient = Redis | Cluster;

export interface RedisConnectOptions {
  /** `redis://host:port/db` for one node, or several comma-separated `redis://` seeds for a cluster. */
  url: string;
  /** Treat `url` as cluster seeds even when only one is given. */
  cluster?: boolean;
  /** Per-command timeout: a hung Redis surfaces as an error, never as a stuck worker. */
  commandTimeoutMs?: number;
  connectionName?: string;
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
  if (options.cluster || seeds.length > 1) {
    return new Cluster(
      seeds.map((seed) => {
        const u = new URL(seed);
        return { host: u.hostname, port: Number(u.port || 6379) };
      }),
      { redisOptions: common, enableAutoPipelining: true, scaleReads: 'master' },
    );
  }
  return new Redis(seeds[0] ?? 'redis://127.0.0.1:6379', common);
}
