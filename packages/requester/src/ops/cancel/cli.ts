import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

const ABOUT =
  'A cancelled request gets one result on out, status 499 with meta.error.code cancelled and ' +
  'meta.cancelled {by, at}, and no attempt after the cancel: wherever it waits (queue, behind an ' +
  'ordered head, a retry, the outbox: then at once, not when due). An attempt in flight finishes. ' +
  'requestIds are per client: name the client (the API key name) of the request, or none for a ' +
  'request without meta.client. The cancel is kept CANCEL_RETENTION and applies to copies of the ' +
  'request accepted before it.';

/** `requester cancel <requestId> [--client]`: an operator takes a request back. */
export function registerCancelCommand<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'cancel <requestId>',
    'cancel a request: its one result is cancelled, no further attempt',
    (y) =>
      withJson(y)
        .positional('requestId', { type: 'string', demandOption: true, describe: 'meta.requestId' })
        .option('client', {
          type: 'string',
          describe: 'whose request: the API key name (meta.client); omit for a request without one',
        })
        .example('$0 cancel reminder-42 --client billing', 'the billing service’s reminder-42')
        .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => (await import('./run.ts')).cancel(argv, configFrom),
  );
}
