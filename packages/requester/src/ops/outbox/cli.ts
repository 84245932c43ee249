import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

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
    async (argv) => (await import('./run.ts')).outbox(argv, configFrom),
  );
}
