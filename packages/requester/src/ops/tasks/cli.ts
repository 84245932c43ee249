import { QueueAdmin, queueFromConfig } from '@requester/queue';
import { Dependencies, type Fetcher, UsageError } from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type ConfigFrom,
  cliActor,
  commandKafka,
  commandLogger,
  EXIT_CODES_HELP,
  printJson,
  printTable,
  progress,
  throttled,
  withJson,
} from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { humanTime } from '../format.ts';
import {
  CANCELLABLE_STATES,
  type CancellableState,
  cancelMatching,
  TASK_STATES,
  type TaskFilter,
  type TaskRow,
  type TaskState,
  tasksPage,
} from './index.ts';

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
    async (argv) => {
      const config = configFrom(argv);
      const logger = commandLogger(config);
      const deps = new Dependencies(config, logger);
      const hooks = journalHooks(config, deps);
      // Read `in` only when a page has a queued task whose request is not inline.
      let reader: Fetcher | undefined;
      try {
        const state = argv.state as TaskState;
        const filter: TaskFilter = {
          ...(typeof argv.client === 'string' ? { client: argv.client } : {}),
          ...(argv.origin ? { origin: String(argv.origin) } : {}),
          ...(argv.partition ? { partition: String(argv.partition) } : {}),
          ...(argv['due-after'] ? { dueAfter: String(argv['due-after']) } : {}),
          ...(argv['due-before'] ? { dueBefore: String(argv['due-before']) } : {}),
          ...(argv['older-than'] ? { olderThan: String(argv['older-than']) } : {}),
        };
        const parts = {
          queueAdmin: () => new QueueAdmin(queueFromConfig(config, deps.redis(), { notify: false })),
          sql: () => deps.sql(),
          inRecords: {
            fetchMany: (refs: Parameters<Fetcher['fetchMany']>[0]) => {
              reader ??= commandKafka(config, logger, 'tasks').fetcher({ connections: 1, cacheBytes: 0 });
              return reader.fetchMany(refs);
            },
          },
        };
        if (argv.cancel) {
          if (!CANCELLABLE_STATES.includes(state as CancellableState))
            throw new UsageError(`--cancel takes ${CANCELLABLE_STATES.join(', ')} tasks, not ${state}`);
          const cancelParts = {
            ...parts,
            redis: deps.redis(),
            config,
            logger,
            journal: deps.journal(),
            ...(hooks.hooks.journalAdminAction ? { journalAdminAction: hooks.hooks.journalAdminAction } : {}),
          };
          const counting = throttled((done) => progress(`counting: ${done} ${state} tasks match so far`));
          const preview = await cancelMatching(
            cancelParts,
            cliActor(),
            state as CancellableState,
            filter,
            false,
            counting,
          );
          progress(`${preview.matched} ${state} tasks match`);
          if (!argv.yes || argv['dry-run']) {
            progress('a preview: add --yes to cancel them');
            if (argv.json) printJson(preview);
            return;
          }
          const total = preview.matched;
          const outcome = await cancelMatching(
            cancelParts,
            cliActor(),
            state as CancellableState,
            filter,
            true,
            throttled((done) => progress(`cancelling: ${done}/${total} ${state} tasks`)),
          );
          progress(
            `cancelled ${outcome.cancelled} ${state} tasks (${outcome.already} were cancelled already): their results (cancelled) follow on out`,
          );
          if (argv.json) printJson(outcome);
          return;
        }
        const page = await tasksPage(
          parts,
          state,
          filter,
          Number(argv.limit),
          typeof argv.cursor === 'string' ? argv.cursor : undefined,
        );
        if (argv.json) return printJson(page);
        printTable(page.rows.map((row) => tableRow(state, row)));
        if (page.next) progress(`more: --cursor '${page.next}'`);
      } finally {
        await reader?.close();
        await hooks.close();
        await deps.close();
      }
    },
  );
}

function tableRow(state: TaskState, r: TaskRow): Record<string, string | number> {
  const time = (iso: string | null) => humanTime(iso === null ? null : Date.parse(iso));
  const common = { requestId: r.requestId ?? '–', client: r.client ?? '–' };
  const where = { origin: r.origin ?? '–', partition: r.partition ?? '–' };
  if (state === 'in-flight')
    return {
      ...common,
      'lease expires': time(r.leaseExpiresAt),
      deliveries: r.deliveries ?? '–',
      try: r.tryCount ?? '–',
      ...where,
    };
  if (state === 'dead') return { ...common, dead: time(r.deadAt), reason: r.reason ?? '–', ...where };
  return { ...common, due: time(r.dueAt), queued: time(r.queuedAt), store: r.store, ...where };
}
