import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

const ABOUT =
  'A pause holds the work of one target origin (scheme://host:port), one client (API key name), ' +
  'one partition (with --client: whose) or one destination (the requests naming it) across the deployment: every executor honours it from its ' +
  'next lease (a resume within a second), and it survives restarts (Redis). Paused tasks stay queued in order and are not attempted ' +
  '(no attempt, no limiter token, no breaker failure); they run again, where they were, at resume or --until.';

/** `requester pause|resume <scope> <value>`, `requester pauses`. */
export function registerPauseCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  const target = <U>(y: Argv<U>) =>
    withJson(y)
      .positional('scope', {
        choices: ['origin', 'client', 'partition', 'destination'] as const,
        demandOption: true,
      })
      .positional('value', {
        type: 'string',
        demandOption: true,
        describe: 'the origin (or any URL on it), the client, the partition, or the destination',
      })
      .option('client', { type: 'string', describe: 'partition: whose (the API key name)' });
  cli.command(
    'pause <scope> <value>',
    'pause the work of an origin, a client, a partition or a destination (every executor, from its next lease)',
    (y) =>
      target(y)
        .option('until', { type: 'string', describe: 'resume by itself then: RFC 3339, or a duration (2h)' })
        .example('$0 pause origin https://api.partner.example --until 2h', 'a partner announced maintenance')
        .example('$0 pause partition !order-42 --client billing', 'one ordered partition of billing')
        .example(
          '$0 pause destination partner-billing --until 30m',
          'the calls to one destination, whoever makes them',
        )
        .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => (await import('./run.ts')).pause(argv, configFrom),
  );
  cli.command(
    'resume <scope> <value>',
    'resume the paused work of an origin, a client, a partition or a destination',
    (y) =>
      target(y)
        .example('$0 resume origin https://api.partner.example', 'the partner is back')
        .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => (await import('./run.ts')).resume(argv, configFrom),
  );
  cli.command(
    'pauses',
    'the pauses in force: what, by whom, since and until when',
    (y) => withJson(y).epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => (await import('./run.ts')).pauses(argv, configFrom),
  );
}
