import { Dependencies, Outbox } from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type ConfigFrom,
  commandLogger,
  EXIT_CODES_HELP,
  printFields,
  printJson,
  progress,
  withJson,
} from '../../commands/common.ts';
import { humanSize, humanTime } from '../format.ts';
import { outboxInfo } from './index.ts';

const ABOUT =
  'The outbox holds tasks due later than REDIS_HORIZON (far schedules, long backoffs) in PostgreSQL; ' +
  'relays move due rows to the in topic. Overdue rows are due and not yet claimed: a steady or ' +
  'growing count, or an oldest due time long past, means the relays lag or are down. Counting ' +
  'reads the whole table.';

/** `requester outbox info`: the PostgreSQL outbox at a glance. */
export function registerOutboxCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'outbox <action>',
    'the PostgreSQL outbox (tasks due beyond the Redis horizon): rows, overdue, next due',
    (y) =>
      withJson(y)
        .positional('action', { choices: ['info'] as const, describe: 'info: counts and due times' })
        .example('$0 outbox info', 'rows, overdue rows, oldest and next due time')
        .example('$0 outbox info --json | jq .overdue', 'for an alert script')
        .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => {
      const config = configFrom(argv);
      const deps = new Dependencies(config, commandLogger(config));
      try {
        progress('outbox info: counting rows');
        const stats = await outboxInfo(new Outbox(await deps.sql()));
        if (argv.json) return printJson(stats);
        const nowMs = Date.parse(stats.at ?? '') || Date.now();
        const at = (text: string | null) => humanTime(text === null ? null : Date.parse(text), nowMs);
        printFields({
          rows: stats.rows,
          overdue: stats.overdue,
          'oldest due': at(stats.oldestDueAt),
          'next due': at(stats.nextDueAt),
          'last due': at(stats.lastDueAt),
          payloads: humanSize(stats.payloadBytes),
        });
      } finally {
        await deps.close();
      }
    },
  );
}
