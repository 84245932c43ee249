import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';
import { CANCELLABLE_STATES, TASK_STATES } from './states.ts';

/** `requester tasks pending|scheduled|in-flight|dead`: a state's tasks, a page at a time; `--cancel` by selection. */
export function registerTasksCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'tasks <state>',
    'list tasks by state, a page at a time, filtered; cancel a selection (preview first)',
    (y) =>
      withJson(y)
        .positional('state', {
          choices: TASK_STATES,
          describe:
            'pending: due now, waiting in Redis; scheduled: due later (Redis timers, then the PostgreSQL outbox); in-flight: leased by an executor; dead: the queue’s dead tasks',
        })
        .option('client', {
          type: 'string',
          describe: "whose (API key name); '' = requests without a client",
        })
        .option('origin', { type: 'string', describe: 'requests to this origin (or any URL on it)' })
        .option('partition', {
          type: 'string',
          describe: "the request's meta.partition (with --client, that client's; or '<partition> @<client>')",
        })
        .option('due-after', {
          type: 'string',
          describe:
            "the state's time (due; in-flight: lease expiry; dead: dead time) at or after this RFC 3339 time",
        })
        .option('due-before', { type: 'string', describe: "the state's time before this RFC 3339 time" })
        .option('older-than', { type: 'string', describe: 'queued longer ago than this duration (e.g. 10m)' })
        .option('limit', { type: 'number', default: 50, describe: 'rows per page (1…1000)' })
        .option('cursor', { type: 'string', describe: 'the next page: the cursor the previous one printed' })
        .option('cancel', {
          type: 'boolean',
          default: false,
          describe: `cancel every task the selection matches (${CANCELLABLE_STATES.join(', ')}): counts them first (the preview); acts with --yes`,
        })
        .option('dry-run', {
          type: 'boolean',
          default: false,
          describe: 'with --cancel: only the preview (the default without --yes)',
        })
        .option('yes', { type: 'boolean', default: false, describe: 'with --cancel: do it' })
        .example(
          '$0 tasks pending --client billing --older-than 10m',
          'billing’s due tasks waiting over 10 minutes',
        )
        .example(
          '$0 tasks in-flight --origin https://api.x.com',
          'what executors are running against api.x.com',
        )
        .example(
          '$0 tasks scheduled --client billing --due-before 2026-12-24T00:00:00Z --cancel',
          'how many would be cancelled (add --yes to cancel them)',
        )
        .epilogue(EXIT_CODES_HELP),
    async (argv) => (await import('./run.ts')).tasks(argv, configFrom),
  );
}
