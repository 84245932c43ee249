import {
  type Config,
  createKafka,
  createLogger,
  createRedis,
  Dependencies,
  type KafkaClient,
  kafkaSecurityFrom,
  type Logger,
  type RedisClient,
} from '@requester/shared';
import { recordAdminAction } from '../ops/audit.ts';
import { journalHooks } from '../runtime/journal.ts';
import { cliActor } from './common.ts';

/**
 * The clients and log of an admin command, for the commands' implementations (their `run.ts`):
 * apart from ./common.ts, which the commands' definitions import, so that --help loads none of them.
 */

/**
 * The log of an admin command: JSON on stderr (stdout carries the results), warnings and up by
 * default. Through `process.stderr` rather than a file descriptor of its own, so that the lines
 * keep their place among the command's other output, also when a test runs the command in-process.
 */
export function commandLogger(config: Config): Logger {
  return createLogger({
    level: config.logLevel === 'info' ? 'warn' : config.logLevel,
    destination: process.stderr,
  });
}

/** The Redis client of an admin command: long command timeout, connection trouble logged once. */
export function commandRedis(config: Config, logger: Logger): RedisClient {
  return createRedis({
    url: config.redisUrl,
    cluster: config.redisCluster,
    failoverRetryMs: config.redisFailoverRetry,
    commandTimeoutMs: 30_000,
    logger,
  });
}

/** The Kafka client of an admin command (`purpose` ends its client id: `requester-dlq`, `-trace`). */
export function commandKafka(config: Config, logger: Logger, purpose: string): KafkaClient {
  return createKafka({
    brokers: config.kafkaBrokers,
    clientId: `${config.kafkaClientId}-${purpose}`,
    logger,
    security: kafkaSecurityFrom(config),
  });
}

/**
 * Records that a command showed requests with their secrets (`--reveal`): an operator action like
 * a replay — a log line, the admin_actions_total metric, and an `admin_action` event in the task
 * journal of each request it showed (the admin API journals its `?reveal=true` the same way).
 */
export async function recordReveal(
  config: Config,
  logger: Logger,
  view: string,
  requestIds: ReadonlyArray<string | null | undefined>,
): Promise<void> {
  const deps = new Dependencies(config, logger);
  try {
    const shown = [...new Set(requestIds.filter((id): id is string => typeof id === 'string' && id !== ''))];
    await recordAdminAction(
      logger,
      { action: 'secrets.reveal', actor: cliActor(), target: { view, requestIds: shown }, outcome: 'done' },
      journalHooks(config, deps).hooks.journalAdminAction,
    );
  } finally {
    await deps.close();
  }
}
