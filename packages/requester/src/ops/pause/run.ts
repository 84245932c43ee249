import { Dependencies } from '@requester/shared';
import { commandLogger } from '../../commands/clients.ts';
import { type ConfigFrom, cliActor, printJson, printTable, progress } from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { humanTime } from '../format.ts';
import { listPauses, type PauseParts, pauseWork, resumeWork, untilArg } from './index.ts';

/** The implementations of ./cli.ts's commands, imported when one of them runs. */

type TargetArgs = { scope: 'origin' | 'client' | 'partition'; value: string; client?: string; json: boolean };

/** `requester pause <scope> <value>`. */
export function pause(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const args = argv as TargetArgs & { until?: string };
  return run(argv, configFrom, async (parts) => {
    const row = await pauseWork(
      parts,
      cliActor(),
      { scope: args.scope, value: args.value, client: args.client },
      untilArg(args.until),
    );
    progress(`paused ${row.scope} ${row.value}${row.until ? ` until ${row.until}` : ' until resumed'}`);
    return row;
  });
}

/** `requester resume <scope> <value>`. */
export function resume(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const args = argv as TargetArgs;
  return run(argv, configFrom, async (parts) => {
    const result = await resumeWork(parts, cliActor(), {
      scope: args.scope,
      value: args.value,
      client: args.client,
    });
    progress(result.resumed ? `resumed ${result.scope} ${result.value}` : `${result.value} was not paused`);
    return result;
  });
}

/** `requester pauses`. */
export function pauses(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  return run(argv, configFrom, async (parts) => {
    const rows = await listPauses(parts);
    if (!argv.json)
      printTable(
        rows.map((r) => ({
          scope: r.scope,
          value: r.value,
          by: r.by,
          since: humanTime(r.since === null ? null : Date.parse(r.since)),
          until: r.until === null ? 'resumed by hand' : humanTime(Date.parse(r.until)),
        })),
      );
    return rows;
  });
}

async function run(
  argv: Record<string, unknown>,
  configFrom: ConfigFrom,
  act: (parts: PauseParts) => Promise<unknown>,
): Promise<void> {
  const config = configFrom(argv);
  const logger = commandLogger(config);
  const deps = new Dependencies(config, logger);
  const hooks = journalHooks(config, deps);
  try {
    const parts: PauseParts = { redis: deps.redis(), prefix: config.redisPrefix, logger };
    if (hooks.hooks.journalAdminAction) parts.journalAdminAction = hooks.hooks.journalAdminAction;
    const value = await act(parts);
    if (argv.json) printJson(value);
  } finally {
    await hooks.close();
    await deps.close();
  }
}
