import { QueueAdmin, queueFromConfig } from '@requester/queue';
import { UsageError } from '@requester/shared';
import type { Argv } from 'yargs';
import { type ConfigFrom, commandLogger, commandRedis } from './common.ts';

/** `requester queue info|purge|retry|dlq|verify`: the operator's view of the Redis fair queue. */
export function registerQueueCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'queue <action> [ids..]',
    'inspect and maintain the Redis fair queue',
    (y) =>
      y
        .positional('action', {
          choices: ['info', 'purge', 'retry', 'dlq', 'verify'] as const,
          describe:
            'info: depth per shard and totals; purge: delete tasks (--dead-only, needs --yes); ' +
            'retry: dead letters back into their partitions (ids, or --all); dlq: list dead letters; ' +
            'verify: full consistency check',
        })
        .positional('ids', {
          type: 'string',
          array: true,
          describe: 'task ids (requestId:tryCount) for retry',
        })
        .option('json', { type: 'boolean', default: false, describe: 'print JSON instead of a table' })
        .option('all', { type: 'boolean', default: false, describe: 'retry: every dead letter' })
        .option('dead-only', { type: 'boolean', default: false, describe: 'purge: only the dead letters' })
        .option('yes', { type: 'boolean', default: false, describe: 'purge: confirm the deletion' })
        .option('limit', { type: 'number', default: 50, describe: 'dlq: how many dead letters to list' })
        .example('$0 queue info', 'totals and the shards that hold anything')
        .example('$0 queue retry --all', 'every dead letter back in its partition'),
    async (argv) => {
      const config = configFrom(argv);
      const redis = commandRedis(config, commandLogger(config));
      const queue = queueFromConfig(config, redis, { notify: false });
      const admin = new QueueAdmin(queue);
      try {
        await runAction(admin, argv as unknown as QueueArgs);
      } finally {
        await queue.close();
        redis.disconnect();
      }
    },
  );
}

interface QueueArgs {
  action: 'info' | 'purge' | 'retry' | 'dlq' | 'verify';
  ids?: string[];
  json: boolean;
  all: boolean;
  deadOnly: boolean;
  yes: boolean;
  limit: number;
}

async function runAction(admin: QueueAdmin, args: QueueArgs): Promise<void> {
  const onProgress = progressBar(args.action);
  switch (args.action) {
    case 'info': {
      const info = await admin.info({ onProgress });
      if (args.json) return print(info);
      const busy = info.shards.filter((s) => s.pending + s.inFlight + s.dead > 0);
      console.table({ total: { ...info.totals, oldestTaskAgeMs: info.oldestTaskAgeMs } });
      if (busy.length > 0) console.table(busy);
      return;
    }
    case 'purge': {
      if (!args.yes)
        throw new UsageError(
          `purge deletes ${args.deadOnly ? 'every dead letter' : 'the whole queue'}: add --yes`,
        );
      return print(await admin.purge({ deadOnly: args.deadOnly, onProgress }));
    }
    case 'retry': {
      if (!args.all && !args.ids?.length) throw new UsageError('retry needs task ids or --all');
      return print(await admin.retryDead(args.all ? 'all' : (args.ids ?? []), { onProgress }));
    }
    case 'dlq':
      return print(await admin.listDead(args.limit));
    case 'verify': {
      const report = await admin.verify({ onProgress });
      print(report);
      if (report.violations.length > 0) process.exitCode = 1;
      return;
    }
  }
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Progress on stderr (one line, rewritten in place on a terminal). */
function progressBar(label: string): (done: number, total: number) => void {
  return (done, total) => {
    const line = `requester queue ${label}: shard ${done}/${total}`;
    if (process.stderr.isTTY) process.stderr.write(`\r${line}${done === total ? '\n' : ''}`);
    else if (done === total || done % 32 === 0) process.stderr.write(`${line}\n`);
  };
}
