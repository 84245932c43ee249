import { breakerFromConfig, type CircuitBreaker } from '@requester/policies';
import type { Config } from '@requester/shared';
import { commandLogger, commandRedis } from '../../commands/clients.ts';
import {
  type ConfigFrom,
  cliActor,
  printFields,
  printJson,
  printTable,
  progress,
} from '../../commands/common.ts';
import { recordAdminAction } from '../audit.ts';
import { humanTime } from '../format.ts';
import { breakerKeyArg, listBreakers, resetBreaker, showBreaker } from './index.ts';

interface BreakersArgs {
  action: 'list' | 'show' | 'reset';
  origin?: string;
  limit: number;
  json: boolean;
  config: Config;
}

/** `requester breakers`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function breakers(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const args = argv as unknown as BreakersArgs;
  const config = configFrom(argv);
  const logger = commandLogger(config);
  const redis = commandRedis(config, logger);
  try {
    await runAction(breakerFromConfig(config, redis, { stateCacheMs: 0 }), { ...args, config });
  } finally {
    redis.disconnect();
  }
}

async function runAction(breaker: CircuitBreaker, args: BreakersArgs): Promise<void> {
  if (args.action === 'list') return list(breaker, args);
  const origin = breakerKeyArg(args.origin, args.action);
  if (args.action === 'show') return show(breaker, origin, args.json);
  const result = await resetBreaker(breaker, origin);
  await recordAdminAction(commandLogger(args.config), {
    action: 'breaker.reset',
    actor: cliActor(),
    target: { origin, ...(result.held ? { held: result.held } : {}) },
    outcome: 'done',
  });
  const hold = result.held ? ` and ended its hold (${result.held})` : '';
  progress(
    result.reset
      ? `closed the breaker of ${origin}${hold}; executors follow within BREAKER_STATE_CACHE`
      : `${origin} had no breaker state (closed already)`,
  );
  if (args.json) printJson(result);
}

async function list(breaker: CircuitBreaker, args: BreakersArgs): Promise<void> {
  const rows = await listBreakers(breaker, args.limit);
  if (args.json) return printJson(rows.map(({ failures: _f, ...row }) => row));
  printTable(
    rows.map((row) => ({
      origin: row.origin,
      state: row.state,
      held: row.held ? `${row.held} since ${humanTime(epoch(row.heldSince))}` : '-',
      opens: row.opensInARow,
      openSince: humanTime(epoch(row.openSince)),
      openUntil: humanTime(epoch(row.openUntil)),
      probing: row.slots > 0,
    })),
  );
}

async function show(breaker: CircuitBreaker, origin: string, json: boolean): Promise<void> {
  const s = await showBreaker(breaker, origin);
  if (json) return printJson(s);
  printFields({
    origin,
    state: s.state,
    'failures in a row': s.failures ?? (s.state === 'closed' ? 'not seen (or forgotten)' : '-'),
    'held back': s.held ? `${s.held} since ${humanTime(epoch(s.heldSince))}` : 'no',
    'failures in the run': s.failuresInRun,
    'failing since': humanTime(epoch(s.failingSince)),
    'opens in a row': s.opensInARow,
    'open since': humanTime(epoch(s.openSince)),
    'open until': humanTime(epoch(s.openUntil)),
    'trial slots held': s.slots,
  });
}

function epoch(isoText: string | null): number | null {
  return isoText === null ? null : Date.parse(isoText);
}
