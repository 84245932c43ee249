import { QueueAdmin, queueFromConfig } from '@requester/queue';
import { type Config, decodeQueuedTask, UsageError } from '@requester/shared';
import { commandLogger, commandRedis, recordReveal } from '../../commands/clients.ts';
import {
  type ConfigFrom,
  printFields,
  printJson,
  printTable,
  progress,
  progressCounter,
} from '../../commands/common.ts';
import { printClients } from '../clients/cli.ts';
import { humanSpan, humanTime, isoTime } from '../format.ts';
import { redactQueuedPayload } from '../redact.ts';
import type { QueueAction } from './cli.ts';

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

/** `requester queue …`: the implementation of `action`, imported when it runs (./cli.ts defines the commands). */
export async function queue(
  action: QueueAction,
  argv: Record<string, unknown>,
  configFrom: ConfigFrom,
): Promise<void> {
  const config = configFrom(argv);
  const redis = commandRedis(config, commandLogger(config));
  const queue = queueFromConfig(config, redis, { notify: false });
  try {
    await ACTIONS[action](new QueueAdmin(queue), argv as unknown as QueueArgs, config);
  } finally {
    await queue.close();
    redis.disconnect();
  }
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

const ACTIONS: Readonly<Record<QueueAction, Action>> = {
  info,
  verify,
  purge,
  deadList,
  deadRetry,
  deadPurge,
  // Deprecated names (hidden from --help): they said "dlq" for dead tasks.
  dlq: deprecated('queue dlq', 'queue dead list', deadList),
  retry: deprecated('queue retry', 'queue dead retry', deadRetry),
};
