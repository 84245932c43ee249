import { Dependencies, Outbox } from '@requester/shared';
import { commandLogger } from '../../commands/clients.ts';
import { type ConfigFrom, printFields, printJson, progress } from '../../commands/common.ts';
import { humanSize, humanTime } from '../format.ts';
import { outboxInfo } from './index.ts';

/** `requester outbox`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function outbox(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
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
}
