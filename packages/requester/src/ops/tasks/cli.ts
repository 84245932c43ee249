import { Dependencies } from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type ConfigFrom,
  cliActor,
  commandLogger,
  EXIT_CODES_HELP,
  printJson,
  printTable,
  progress,
  progressCounter,
  withJson,
} from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { humanTime } from '../format.ts';
import { cancelScheduled, scheduledPage } from './index.ts';

/** `requester tasks scheduled`: the requests waiting in the outbox, a page at a time. */
export function registerTasksCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'tasks <state>',
    'list tasks by state, a page at a time (so far: scheduled, the outbox)',
    (y) =>
      withJson(y)
        .positional('state', {
          choices: ['scheduled'] as const,
          describe:
            'scheduled: requests waiting in the PostgreSQL outbox (beyond REDIS_HORIZON), by due time',
        })
        .option('client', {
          type: 'string',
          describe: "whose (API key name); '' = requests without a client",
        })
        .option('due-after', { type: 'string', describe: 'due at or after this RFC 3339 time' })
        .option('due-before', { type: 'string', describe: 'due before this RFC 3339 time' })
        .option('limit', { type: 'number', default: 50, describe: 'rows per page (1…1000)' })
        .option('cursor', { type: 'string', describe: 'the next page: the cursor the previous one printed' })
        .option('cancel', {
          type: 'boolean',
          default: false,
          describe: 'cancel every request the selection matches: prints how many first; acts with --yes',
        })
        .option('yes', { type: 'boolean', default: false, describe: 'with --cancel: do it' })
        .example(
          '$0 tasks scheduled --client billing --due-before 2026-12-24T00:00:00Z --cancel',
          'how many would be cancelled',
        )
        .example('$0 tasks scheduled --client billing', 'what billing has scheduled, soonest first')
        .epilogue(EXIT_CODES_HELP),
    async (argv) => {
      const config = configFrom(argv);
      const logger = commandLogger(config);
      const deps = new Dependencies(config, logger);
      const hooks = journalHooks(config, deps);
      try {
        const filter = {
          ...(typeof argv.client === 'string' ? { client: argv.client } : {}),
          ...(argv['due-after'] ? { dueAfter: String(argv['due-after']) } : {}),
          ...(argv['due-before'] ? { dueBefore: String(argv['due-before']) } : {}),
        };
        if (argv.cancel) {
          const outcome = await cancelScheduled(
            {
              sql: await deps.sql(),
              redis: deps.redis(),
              config,
              logger,
              journal: deps.journal(),
              ...(hooks.hooks.journalAdminAction
                ? { journalAdminAction: hooks.hooks.journalAdminAction }
                : {}),
            },
            cliActor(),
            filter,
            Boolean(argv.yes),
            progressCounter('cancelling', 'requests'),
          );
          progress(
            outcome.preview
              ? `${outcome.matched} scheduled requests match; add --yes to cancel them`
              : `cancelled ${outcome.cancelled} scheduled requests: their results (cancelled) follow on out`,
          );
          if (argv.json) printJson(outcome);
          return;
        }
        const page = await scheduledPage(
          await deps.sql(),
          {
            ...(typeof argv.client === 'string' ? { client: argv.client } : {}),
            ...(argv['due-after'] ? { dueAfter: String(argv['due-after']) } : {}),
            ...(argv['due-before'] ? { dueBefore: String(argv['due-before']) } : {}),
          },
          Number(argv.limit),
          typeof argv.cursor === 'string' ? argv.cursor : undefined,
        );
        if (argv.json) return printJson(page);
        printTable(
          page.rows.map((r) => ({
            requestId: r.requestId,
            client: r.client ?? '–',
            due: humanTime(r.dueAt === null ? null : Date.parse(r.dueAt)),
            origin: r.origin ?? '(wake-up)',
            partition: r.partition ?? '–',
          })),
        );
        if (page.next) progress(`more: --cursor '${page.next}'`);
      } finally {
        await hooks.close();
        await deps.close();
      }
    },
  );
}
