import { QueueAdmin, queueFromConfig } from '@requester/queue';
import { Dependencies, type Fetcher, UsageError } from '@requester/shared';
import { commandKafka, commandLogger } from '../../commands/clients.ts';
import {
  type ConfigFrom,
  cliActor,
  printJson,
  printTable,
  progress,
  throttled,
} from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { humanTime } from '../format.ts';
import {
  CANCELLABLE_STATES,
  type CancellableState,
  cancelMatching,
  concurrencyText,
  type TaskFilter,
  type TaskRow,
  type TaskState,
  tasksPage,
} from './index.ts';

/** `requester tasks`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function tasks(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
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
}

function tableRow(state: TaskState, r: TaskRow): Record<string, string | number> {
  const time = (iso: string | null) => humanTime(iso === null ? null : Date.parse(iso));
  const common = { requestId: r.requestId ?? '–', client: r.client ?? '–' };
  const where = { origin: r.origin ?? '–', partition: r.partition ?? '–' };
  const deadline = r.deadline === null ? '–' : time(r.deadline);
  const priority = r.priority ?? '–';
  const debounce = r.debounce ?? '–';
  const concurrency = concurrencyText(r.concurrency) ?? '–';
  if (state === 'in-flight')
    return {
      ...common,
      'lease expires': time(r.leaseExpiresAt),
      deliveries: r.deliveries ?? '–',
      try: r.tryCount ?? '–',
      deadline,
      priority,
      debounce,
      concurrency,
      ...where,
    };
  if (state === 'dead') return { ...common, dead: time(r.deadAt), reason: r.reason ?? '–', ...where };
  return {
    ...common,
    due: time(r.dueAt),
    queued: time(r.queuedAt),
    deadline,
    priority,
    debounce,
    concurrency,
    store: r.store,
    ...where,
  };
}
