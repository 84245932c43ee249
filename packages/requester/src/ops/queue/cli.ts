import { QueueAdmin, queueFromConfig } from '@requester/queue';
import { type Config, decodeQueuedTask, UsageError } from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type ConfigFrom,
  commandLogger,
  commandRedis,
  EXIT_CODES_HELP,
  printFields,
  printJson,
  printTable,
  progress,
  progressCounter,
  recordReveal,
  withJson,
  withReveal,
} from '../../commands/common.ts';
import { printClients } from '../clients/cli.ts';
import { humanSpan, humanTime, isoTime } from '../format.ts';
import { redactQueuedPayload } from '../redact.ts';

/**
 * `requester queue info|verify|purge` and `requester queue dead list|retry|purge`: the operator's
 * view of the Redis fair queue.
 *
 * Vocabulary: a *dead task* is one the queue itself gave up on (a payload that is not a task; a
 * lease that kept expiring, where maxDeliveries is set): it sits in the queue's dead set in Redis, see `queue dead`. A
 * *dead-lettered request* failed for good (retries exhausted, permanent error): it is a record on the
 * DLQ topic, see `requester dlq`. The old names `queue dlq` and `queue retry` (and `purge
 * --dead-only`) still work, hidden, with a deprecation notice on stderr.
 */
const DEAD_TASKS =
  'Dead tasks are tasks the queue itself gave up on (a payload that is not a task; or, with ' +
  'maxDeliveries set, a lease that kept expiring); they wait in the queue in Redis until retried ' +
  'or purged. Requests that failed for good are not here: they are dead letters on the DLQ topic ' +
  '(`requester dlq`).';

interface QueueArgs {
  json: boolean;
  byClient: boolean;
  ids?: string[];
  all: boolean;
  deadOnly: boolean;
  yes: boolean;
  limit: number;
  reveal: boolean;
}

type Action = (admin: QueueAdmin, args: QueueArgs, config: Config) => Promise<void>;

export function registerQueueCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  const run = (action: Action) => async (argv: Record<string, unknown>) => {
    const config = configFrom(argv);
    const redis = commandRedis(config, commandLogger(config));
    const queue = queueFromConfig(config, redis, { notify: false });
    try {
      await action(new QueueAdmin(queue), argv as unknown as QueueArgs, config);
    } finally {
      await queue.close();
      redis.disconnect();
    }
  };
  cli.command('queue <command>', 'inspect and maintain the Redis fair queue (and its dead tasks)', (y) =>
    y
      .command(
        'info',
        'depth per shard and in total, oldest waiting task',
        (q) =>
          withJson(q)
            .option('by-client', {
              type: 'boolean',
              default: false,
              describe:
                'per client instead: pending tasks, ready partitions, weight, cap and tasks in flight (capped clients), and how long its next task has waited, largest backlog first',
            })
            .example('$0 queue info', 'totals, then the shards that hold anything')
            .example('$0 queue info --by-client', 'who holds the backlog, and who waits')
            .example('$0 queue info --json | jq .totals.pending', 'tasks waiting, for a script')
            .epilogue(EXIT_CODES_HELP),
        run(info),
      )
      .command(
        'verify',
        'full consistency check of every shard (O(tasks): troubleshooting, not a busy queue); exit 1 on a violation',
        (q) => withJson(q).example('$0 queue verify', '').epilogue(EXIT_CODES_HELP),
        run(verify),
      )
      .command(
        'purge',
        'delete every task of the queue (needs --yes); dead tasks only: `queue dead purge`',
        (q) =>
          withJson(q)
            .option('yes', { type: 'boolean', default: false, describe: 'confirm the deletion' })
            .option('dead-only', { type: 'boolean', default: false, hidden: true })
            .example('$0 queue purge --yes', 'empty the queue (tests, a broken environment)')
            .epilogue(EXIT_CODES_HELP),
        run(purge),
      )
      .command('dead <command>', "the queue's dead tasks: list, retry, purge", (d) =>
        d
          .command(
            'list',
            'the most recent dead tasks, newest first',
            (q) =>
              withReveal(withJson(q))
                .option('limit', { type: 'number', default: 50, describe: 'how many' })
                .example('$0 queue dead list --limit 10', '')
                .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
            run(deadList),
          )
          .command(
            'retry [ids..]',
            'put dead tasks back into their partitions as new arrivals',
            (q) =>
              retryOptions(withJson(q))
                .example('$0 queue dead retry ord-42:1', 'one task (id requestId:tryCount)')
                .example('$0 queue dead retry --all', 'every dead task')
                .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
            run(deadRetry),
          )
          .command(
            'purge',
            'delete every dead task (needs --yes); their ids stay refused for the dedup window',
            (q) =>
              withJson(q)
                .option('yes', { type: 'boolean', default: false, describe: 'confirm the deletion' })
                .example('$0 queue dead purge --yes', '')
                .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
            run(deadPurge),
          )
          .demandCommand(1, 'queue dead: give list, retry or purge')
          .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
      )
      // Deprecated names, hidden from --help (description false): they said "dlq" for dead tasks.
      .command(
        'dlq',
        false,
        (q) => withReveal(withJson(q)).option('limit', { type: 'number', default: 50 }),
        run(deprecated('queue dlq', 'queue dead list', deadList)),
      )
      .command(
        'retry [ids..]',
        false,
        (q) => retryOptions(withJson(q)),
        run(deprecated('queue retry', 'queue dead retry', deadRetry)),
      )
      .demandCommand(1, 'queue: give info, verify, purge or dead')
      .example('$0 queue info', 'how deep the queue is')
      .example('$0 queue dead list', 'tasks the queue gave up on')
      .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
  );
}

function retryOptions<T>(y: Argv<T>) {
  return y
    .positional('ids', { type: 'string', array: true, describe: 'task ids (requestId:tryCount)' })
    .option('all', { type: 'boolean', default: false, describe: 'every dead task' });
}

function deprecated(old: string, now: string, action: Action): Action {
  return (admin, args, config) => {
    progress(`warning: \`requester ${old}\` is deprecated; use \`requester ${now}\``);
    return action(admin, args, config);
  };
}

async function info(admin: QueueAdmin, args: QueueArgs): Promise<void> {
  if (args.byClient) return printClients(admin, args.json);
  const result = await admin.info({ onProgress: progressCounter('queue info', 'shard') });
  if (args.json) return printJson(result);
  const { totals } = result;
  printFields({
    pending: totals.pending,
    'in flight': totals.inFlight,
    'dead tasks': totals.dead,
    'oldest waiting': result.oldestTaskAgeMs === null ? '-' : humanSpan(result.oldestTaskAgeMs),
    'ready partitions': totals.readyPartitions,
    'waiting partitions': totals.waitingPartitions,
    'blocked partitions': totals.blockedPartitions,
    'dedup ids': totals.dedupIds,
    shards: result.shards.length,
  });
  const busy = result.shards.filter((s) => s.pending + s.inFlight + s.dead > 0);
  if (busy.length === 0) return;
  process.stdout.write('\n');
  printTable(
    busy.map((s) => ({
      shard: s.shard,
      pending: s.pending,
      inFlight: s.inFlight,
      dead: s.dead,
      ready: s.readyPartitions,
      waiting: s.waitingPartitions,
      blocked: s.blockedPartitions,
      oldest: humanTime(s.oldestPublishedAt),
    })),
  );
}

async function verify(admin: QueueAdmin, args: QueueArgs): Promise<void> {
  const report = await admin.verify({ onProgress: progressCounter('queue verify', 'shard') });
  if (report.violations.length > 0) process.exitCode = 1;
  if (args.json) return printJson(report);
  process.stdout.write(
    `${report.tasks} tasks, ${report.violations.length ? `${report.violations.length} violation(s):` : 'consistent'}\n`,
  );
  for (const violation of report.violations) process.stdout.write(`  ${violation}\n`);
}

async function purge(admin: QueueAdmin, args: QueueArgs): Promise<void> {
  if (args.deadOnly) {
    progress('warning: `requester queue purge --dead-only` is deprecated; use `requester queue dead purge`');
    return deadPurge(admin, args);
  }
  if (!args.yes) throw new UsageError('queue purge deletes the whole queue: add --yes');
  const result = await admin.purge({ onProgress: progressCounter('queue purge', 'shard') });
  if (args.json) return printJson(result);
  process.stdout.write(`removed ${result.removed} tasks\n`);
}

async function deadList(admin: QueueAdmin, args: QueueArgs, config: Config): Promise<void> {
  const limit = args.limit;
  if (!Number.isInteger(limit) || limit < 0)
    throw new UsageError(`--limit must be a whole number ≥ 0, got ${limit}`);
  const dead = await admin.listDead(limit);
  if (args.reveal)
    await recordReveal(config, commandLogger(config), 'queue dead list', dead.map(requestIdOf));
  if (args.json)
    return printJson(
      dead.map((t) => ({
        ...t,
        payload: args.reveal ? t.payload : redactQueuedPayload(t.payload),
        deadAt: isoTime(t.deadAt),
        publishedAt: isoTime(t.publishedAt),
      })),
    );
  printTable(
    dead.map((t) => ({
      id: t.id,
      partition: t.partition,
      reason: t.reason,
      died: humanTime(t.deadAt),
      deliveries: t.deliveries,
      published: humanTime(t.publishedAt),
      shard: t.shard,
    })),
  );
}

/** The request of a dead task, when its payload is a task (a dead one may be anything). */
function requestIdOf(task: { payload: string }): string | undefined {
  try {
    return decodeQueuedTask(task.payload).requestId;
  } catch {
    return undefined;
  }
}

async function deadRetry(admin: QueueAdmin, args: QueueArgs): Promise<void> {
  if (!args.all && !args.ids?.length) throw new UsageError('retry needs task ids or --all');
  const result = await admin.retryDead(args.all ? 'all' : (args.ids ?? []).map(String), {
    onProgress: progressCounter('queue dead retry', 'shard'),
  });
  if (args.json) return printJson(result);
  process.stdout.write(`retried ${result.retried} dead tasks\n`);
}

async function deadPurge(admin: QueueAdmin, args: QueueArgs): Promise<void> {
  if (!args.yes) throw new UsageError('queue dead purge deletes every dead task: add --yes');
  const result = await admin.purge({
    deadOnly: true,
    onProgress: progressCounter('queue dead purge', 'shard'),
  });
  if (args.json) return printJson(result);
  process.stdout.write(`removed ${result.removed} dead tasks\n`);
}
