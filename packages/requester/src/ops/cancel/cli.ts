import { Dependencies } from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type ConfigFrom,
  cliActor,
  commandLogger,
  EXIT_CODES_HELP,
  printFields,
  printJson,
  progress,
  withJson,
} from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { cancelById, cancelSummary } from './index.ts';

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
    async (argv) => {
      const config = configFrom(argv);
      const logger = commandLogger(config);
      const deps = new Dependencies(config, logger);
      const hooks = journalHooks(config, deps);
      try {
        const client = typeof argv.client === 'string' && argv.client.trim() ? argv.client.trim() : undefined;
        const outcome = await cancelById(
          {
            redis: deps.redis(),
            sql: () => deps.sql(),
            config,
            logger,
            journal: deps.journal(),
            ...(hooks.hooks.journalAdminAction ? { journalAdminAction: hooks.hooks.journalAdminAction } : {}),
          },
          cliActor(),
          client,
          String(argv.requestId),
        );
        progress(cancelSummary(outcome));
        if (argv.json) return printJson(outcome);
        printFields({
          requestId: outcome.requestId,
          client: outcome.client ?? '(none)',
          'cancelled by': outcome.by,
          at: outcome.at,
          'first cancel': outcome.first,
          'outbox rows woken': outcome.outboxWoken,
        });
      } finally {
        await hooks.close();
        await deps.close();
      }
    },
  );
}
