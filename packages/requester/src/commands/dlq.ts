import {
  type Config,
  createFetcher,
  createJournal,
  createKafka,
  createProducer,
  deadLetterRequestId,
  formatRecordRef,
  type Kafka,
  kafkaSecurityFrom,
  type Logger,
  tryParseRfc3339,
  UsageError,
} from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type DlqEntry,
  type DlqFilter,
  type DlqSource,
  listDeadLetters,
  ReplayMarks,
  replayDeadLetters,
} from '../dlq/index.ts';
import { type ConfigFrom, commandLogger, commandRedis, progress } from './common.ts';

interface DlqArgs {
  action: 'list' | 'replay';
  requestId?: string[];
  since?: string;
  until?: string;
  limit?: number;
  json: boolean;
  dryRun: boolean;
  all: boolean;
  force: boolean;
}

/** `requester dlq list|replay`: the dead-letter topic (KAFKA_TOPIC_DLQ), read once up to its current end. */
export function registerDlqCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'dlq <action>',
    'list dead-lettered requests, or replay them to the in topic',
    (y) =>
      y
        .positional('action', {
          choices: ['list', 'replay'] as const,
          describe:
            'list: the most recent dead letters; replay: re-submit the selected requests to in ' +
            '(same requestId, a fresh retry budget; each dead letter once unless --force)',
        })
        .option('request-id', { type: 'string', array: true, describe: 'only these requestIds' })
        .option('since', { type: 'string', describe: 'only dead letters failed at or after (RFC 3339)' })
        .option('until', { type: 'string', describe: 'only dead letters failed before (RFC 3339)' })
        .option('limit', {
          type: 'number',
          describe: 'list: how many (default 50, the most recent); replay: at most this many',
        })
        .option('json', { type: 'boolean', default: false, describe: 'list: JSON lines instead of a table' })
        .option('dry-run', {
          type: 'boolean',
          default: false,
          describe: 'replay: show what would be replayed',
        })
        .option('all', { type: 'boolean', default: false, describe: 'replay: every dead letter (no filter)' })
        .option('force', {
          type: 'boolean',
          default: false,
          describe: 'replay: again those replayed before (under a new task id)',
        })
        .example('$0 dlq list --since 2026-12-01T00:00:00Z', 'what failed since midnight UTC')
        .example('$0 dlq replay --request-id ord-42 --dry-run', 'what a replay of ord-42 would send'),
    async (argv) => {
      const args = argv as unknown as DlqArgs;
      const filter = filterFrom(args);
      const config = configFrom(argv);
      const logger = commandLogger(config);
      const kafka = createKafka({
        brokers: config.kafkaBrokers,
        clientId: `${config.kafkaClientId}-dlq`,
        logger,
        security: kafkaSecurityFrom(config),
      });
      const source = dlqSource(kafka, config.topicDlq, args.action);
      if (args.action === 'list') return runList(source, filter, args);
      return runReplay(source, config, filter, args, logger);
    },
  );
}

function filterFrom(args: DlqArgs): DlqFilter {
  const filter: DlqFilter = {};
  if (args.requestId?.length) filter.requestIds = new Set(args.requestId.map(String));
  if (args.since !== undefined) filter.sinceMs = timeArg('--since', args.since);
  if (args.until !== undefined) filter.untilMs = timeArg('--until', args.until);
  const limit = args.limit;
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0))
    throw new UsageError(`--limit must be a whole number ≥ 0, got ${limit}`);
  if (args.action === 'replay' && !args.all && Object.keys(filter).length === 0)
    throw new UsageError('replay needs a selection: --request-id, --since/--until, or --all');
  return filter;
}

function timeArg(flag: string, text: string): number {
  const parsed = tryParseRfc3339(text);
  if (!parsed.ok) throw new UsageError(`${flag}: ${parsed.message}`);
  return parsed.epochMs;
}

function dlqSource(kafka: Kafka, topic: string, action: string): DlqSource {
  return {
    kafka,
    topic,
    onProgress: throttled((read, expected) =>
      progress(`dlq ${action}: read ${read}/${expected} records of ${topic}`),
    ),
    onUnreadable: (at, problem) =>
      progress(`dlq ${action}: skipping unreadable record ${formatRecordRef(at)}: ${problem}`),
  };
}

async function runList(source: DlqSource, filter: DlqFilter, args: DlqArgs): Promise<void> {
  const result = await listDeadLetters(source, filter, args.limit ?? 50);
  progress(
    `dlq list: read ${result.read} records, ${result.matched} matched, showing ${result.entries.length}` +
      (result.unreadable ? `, ${result.unreadable} unreadable` : ''),
  );
  warnIncomplete(result.incomplete);
  if (args.json) {
    for (const entry of result.entries)
      process.stdout.write(`${JSON.stringify({ dlq: entry.at, ...entry.record })}\n`);
  } else if (result.entries.length > 0) console.table(result.entries.map(row));
}

/** One table row: what an operator scans for. */
function row({ record, at }: DlqEntry) {
  return {
    failedAt: record.failedAt,
    requestId: deadLetterRequestId(record) ?? '',
    reason: record.reason,
    status: record.result.response.status,
    tryCount: record.result.meta.tryCount,
    error: record.result.meta.error?.code ?? '',
    dlq: `${at.partition}/${at.offset}`,
  };
}

async function runReplay(
  source: DlqSource,
  config: Config,
  filter: DlqFilter,
  args: DlqArgs,
  logger: Logger,
): Promise<void> {
  const redis = commandRedis(config, logger);
  const producer = createProducer(source.kafka);
  const reader = createFetcher({
    brokers: config.kafkaBrokers,
    clientId: `${config.kafkaClientId}-dlq`,
    logger,
    security: kafkaSecurityFrom(config),
  });
  const journal = createJournal({
    producer: async () => producer,
    topic: config.topicEvents,
    mode: config.events,
    logger,
    produceTimeoutMs: config.kafkaProduceTimeout,
  });
  try {
    if (!args.dryRun) await producer.connect();
    const summary = await replayDeadLetters(
      { ...source, reader },
      {
        producer,
        topicIn: config.topicIn,
        marks: new ReplayMarks(redis, config.redisPrefix),
        produceTimeoutMs: config.kafkaProduceTimeout,
        journal,
        onReplayed: (done, total) => progress(`dlq replay: replayed ${done}/${total} to ${config.topicIn}`),
      },
      {
        filter,
        ...(args.limit === undefined ? {} : { limit: args.limit }),
        dryRun: args.dryRun,
        force: args.force,
      },
    );
    const { alreadyReplayed, superseded, overLimit, unprocessable } = summary.skipped;
    progress(
      `dlq replay: read ${summary.read} records, ${summary.matched} matched, ` +
        `${args.dryRun ? 'would replay' : 'replayed'} ${summary.replayed.length} ` +
        `(skipped: ${alreadyReplayed} replayed before, ${superseded} superseded, ${overLimit} over the limit, ` +
        `${unprocessable} unprocessable records with no request to replay)`,
    );
    warnIncomplete(summary.incomplete);
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  } finally {
    await journal.close();
    await Promise.all([producer.disconnect(), reader.close()]);
    redis.disconnect();
  }
}

function warnIncomplete(partitions: number[]): void {
  if (partitions.length > 0)
    progress(`warning: stopped before the end of partition(s) ${partitions.join(', ')} (no data came)`);
}

/** At most one progress line a second, plus the last one. */
function throttled(report: (done: number, total: number) => void): (done: number, total: number) => void {
  let last = 0;
  return (done, total) => {
    const now = Date.now();
    if (done < total && now - last < 1_000) return;
    last = now;
    report(done, total);
  };
}
