import { Dependencies } from '@requester/shared';
import { commandLogger } from '../../commands/clients.ts';
import { type ConfigFrom, cliActor, printFields, printJson, progress } from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { cancelById, cancelSummary } from './index.ts';

/** `requester cancel`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function cancel(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
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
}
