import {
  type Config,
  createJournal,
  Dependencies,
  deadLetterRequestId,
  formatRecordRef,
  type KafkaClient,
  type Logger,
  UsageError,
} from '@requester/shared';
import { commandKafka, commandLogger, commandRedis, recordReveal } from '../../commands/clients.ts';
import {
  type ConfigFrom,
  cliActor,
  printJson,
  printTable,
  progress,
  throttled,
} from '../../commands/common.ts';
import { journalAdminAction } from '../../runtime/journal.ts';
import { recordAdminAction } from '../audit.ts';
import { humanTime } from '../format.ts';
import { redactDeadLetter } from '../redact.ts';
import { dlqFilterFrom, HandledDeadLetters, listDeadLetterViews, replayFromDlq } from './index.ts';
import { type DlqEntry, type DlqFilter, type DlqSource, listDeadLetters } from './topic.ts';

interface DlqArgs {
  action: 'list' | 'replay' | 'delete';
  requestId?: string[];
  since?: string;
  until?: string;
  origin?: string;
  errorCode?: string;
  client?: string;
  destination?: string;
  hideHandled: boolean;
  limit?: number;
  json: boolean;
  dryRun: boolean;
  all: boolean;
  force: boolean;
  reveal: boolean;
  /** Set by `destinations recover <name>`: the replay is that recover, in the journal and the audit. */
  recovering?: string;
}

/** `requester dlq`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function dlq(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const args = argv as unknown as DlqArgs;
  const filter = filterFrom(args);
  const config = configFrom(argv);
  const logger = commandLogger(config);
  if (args.hideHandled || args.action === 'delete') {
    const deps = new Dependencies(config, logger);
    try {
      const handled = new HandledDeadLetters(await deps.sql());
      if (args.action !== 'delete') filter.exclude = await handled.refs(config.topicDlq);
      else
        return await runDelete(
          dlqSource(commandKafka(config, logger, 'dlq'), config.topicDlq, 'delete'),
          handled,
          filter,
          args,
          logger,
        );
    } finally {
      await deps.close();
    }
  }
  const kafka = commandKafka(config, logger, 'dlq');
  const source = dlqSource(kafka, config.topicDlq, args.action);
  if (args.action === 'list') return runList(source, filter, args, config, logger);
  return runReplay(source, config, filter, args, logger);
}

function filterFrom(args: DlqArgs): DlqFilter {
  const filter = dlqFilterFrom({
    ...(args.requestId ? { requestIds: args.requestId.map(String) } : {}),
    ...(args.since === undefined ? {} : { since: args.since }),
    ...(args.until === undefined ? {} : { until: args.until }),
    ...(args.origin === undefined ? {} : { origin: args.origin }),
    ...(args.errorCode === undefined ? {} : { errorCode: args.errorCode }),
    ...(args.client === undefined ? {} : { client: args.client }),
    ...(args.destination === undefined ? {} : { destination: args.destination }),
  });
  const limit = args.limit;
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0))
    throw new UsageError(`--limit must be a whole number ≥ 0, got ${limit}`);
  if (args.action !== 'list' && !args.all && Object.keys(filter).length === 0)
    throw new UsageError(
      `${args.action} needs a selection: --request-id, --since/--until, --origin, --error-code, --client, --destination, or --all`,
    );
  return filter;
}

async function runDelete(
  source: DlqSource,
  handled: HandledDeadLetters,
  filter: DlqFilter,
  args: DlqArgs,
  logger: Logger,
): Promise<void> {
  const listed = await listDeadLetterViews(source, filter, args.limit ?? Number.MAX_SAFE_INTEGER);
  const marked = args.dryRun ? 0 : await handled.mark(listed.entries, cliActor());
  if (!args.dryRun)
    await recordAdminAction(logger, {
      action: 'dlq.delete',
      actor: cliActor(),
      target: { refs: listed.entries.map((e) => e.ref) },
      outcome: 'done',
    });
  progress(
    `dlq delete: ${args.dryRun ? 'would mark' : 'marked'} ${args.dryRun ? listed.entries.length : marked} dead letters as handled`,
  );
  if (args.json) printJson({ dryRun: args.dryRun, marked, refs: listed.entries.map((e) => e.ref) });
  else printTable(listed.entries.map((e) => ({ requestId: e.requestId, dlq: e.ref })));
}

function dlqSource(kafka: KafkaClient, topic: string, action: string): DlqSource {
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

async function runList(
  source: DlqSource,
  filter: DlqFilter,
  args: DlqArgs,
  config: Config,
  logger: Logger,
): Promise<void> {
  const result = await listDeadLetters(source, filter, args.limit ?? 50);
  progress(
    `dlq list: read ${result.read} records, ${result.matched} matched, showing ${result.entries.length}` +
      (result.unreadable ? `, ${result.unreadable} unreadable` : ''),
  );
  warnIncomplete(result.incomplete);
  if (args.reveal)
    await recordReveal(
      config,
      logger,
      'dlq list',
      result.entries.map((e) => deadLetterRequestId(e.record)),
    );
  if (args.json)
    return printJson(
      result.entries.map((entry) => ({
        dlq: entry.at,
        ...(args.reveal ? entry.record : redactDeadLetter(entry.record)),
      })),
    );
  printTable(result.entries.map(row));
}

/** One table row: what an operator scans for. */
function row({ record, at }: DlqEntry) {
  return {
    failed: humanTime(Date.parse(record.failedAt)),
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
  // The replays are signed with the deployment's entry secret, in PostgreSQL (docs/architecture.md §10).
  const deps = new Dependencies(config, logger);
  const producer = source.kafka.producer();
  const journal = createJournal({
    producer: async () => producer,
    topic: config.topicEvents,
    mode: config.events,
    logger,
    produceTimeoutMs: config.kafkaProduceTimeout,
  });
  try {
    if (!args.dryRun) await producer.connect();
    const summary = await replayFromDlq(
      source,
      {
        producer,
        redis,
        config,
        journal,
        signer: () => deps.entrySigner(),
        ...(args.recovering ? { by: `requester destinations recover ${args.recovering}` } : {}),
        onReplayed: (done, total) => progress(`dlq replay: replayed ${done}/${total} to ${config.topicIn}`),
      },
      {
        filter,
        ...(args.limit === undefined ? {} : { limit: args.limit }),
        dryRun: args.dryRun,
        force: args.force,
      },
    );
    if (!args.dryRun) {
      const destination = args.recovering ?? args.destination;
      await recordAdminAction(
        logger,
        {
          action: args.recovering ? 'destinations.recover' : 'dlq.replay',
          actor: cliActor(),
          target: {
            ...(destination ? { destination } : {}),
            requestIds: summary.replayed.map((r) => r.requestId),
          },
          outcome: 'done',
        },
        // As the admin API's replay: an `admin_action` of each request it re-sent (and of the
        // destination it named). A recover is an action on the destination, in its journal alone:
        // each re-sent request tells of it in its own `replayed` event.
        async (event) =>
          journalAdminAction(journal, args.recovering ? { ...event, target: { destination } } : event),
      );
    }
    const { alreadyReplayed, superseded, overLimit, unprocessable } = summary.skipped;
    progress(
      `dlq replay: read ${summary.read} records, ${summary.matched} matched, ` +
        `${args.dryRun ? 'would replay' : 'replayed'} ${summary.replayed.length} ` +
        `(skipped: ${alreadyReplayed} replayed before, ${superseded} superseded, ${overLimit} over the limit, ` +
        `${unprocessable} unprocessable records with no request to replay)`,
    );
    warnIncomplete(summary.incomplete);
    if (args.json) printJson(summary);
    else printTable(summary.replayed.map((r) => ({ requestId: r.requestId, taskId: r.taskId, dlq: r.dlq })));
  } finally {
    await journal.close();
    await producer.disconnect();
    redis.disconnect();
    await deps.close();
  }
}

function warnIncomplete(partitions: number[]): void {
  if (partitions.length > 0)
    progress(`warning: stopped before the end of partition(s) ${partitions.join(', ')} (no data came)`);
}
