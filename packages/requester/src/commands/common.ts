import { type Config, createLogger, createRedis, type Logger, type RedisClient } from '@requester/shared';

/**
 * What every admin subcommand uses, apart from the registry in index.ts (which imports the
 * subcommand modules, so they cannot import it back without a cycle).
 */

/** How a subcommand reads its configuration: environment, then its parsed flags. */
export type ConfigFrom = (argv: Record<string, unknown>) => Config;

/** The log of an admin command: JSON on stderr (stdout carries the results), warnings and up by default. */
export function commandLogger(config: Config): Logger {
  return createLogger({ level: config.logLevel === 'info' ? 'warn' : config.logLevel, destination: 2 });
}

/** The Redis client of an admin command: long command timeout, connection trouble logged once. */
export function commandRedis(config: Config, logger: Logger): RedisClient {
  return createRedis({
    url: config.redisUrl,
    cluster: config.redisCluster,
    commandTimeoutMs: 30_000,
    logger,
  });
}

export function progress(message: string): void {
  process.stderr.write(`requester: ${message}\n`);
}
