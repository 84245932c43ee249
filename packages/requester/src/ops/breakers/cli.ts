import { breakerFromConfig, type CircuitBreaker } from '@requester/policies';
import type { Config } from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type ConfigFrom,
  cliActor,
  commandLogger,
  commandRedis,
  EXIT_CODES_HELP,
  printFields,
  printJson,
  printTable,
  progress,
  withJson,
} from '../../commands/common.ts';
import { recordAdminAction } from '../audit.ts';
import { humanTime } from '../format.ts';
import { listBreakers, originArg, resetBreaker, showBreaker } from './index.ts';

interface BreakersArgs {
  action: 'list' | 'show' | 'reset';
  origin?: string;
  limit: number;
  json: boolean;
  config: Config;
}

const ABOUT =
  'One circuit breaker per target origin (scheme://host:port), shared by every executor in Redis: ' +
  'BREAKER_FAILURE_THRESHOLD failures in a row open it for BREAKER_OPEN_DURATION (doubling while ' +
  'probes fail, up to BREAKER_MAX_OPEN_DURATION); then one probe call decides. An origin failing ' +
  'for ORIGIN_FAILING_HOLD_AFTER is held back (held: failing): its tasks wait, not attempted, while ' +
  'one probe per BREAKER_MAX_OPEN_DURATION checks it; one whose receiver answered ' +
  '`webhook-delivery: disable` is held until reset (held: opt_out). reset closes it and ends a hold ' +
  'at once; executors that cached the open state follow within BREAKER_STATE_CACHE.';

/** `requester breakers list|show|reset`: the shared circuit breakers of the target origins. */
export function registerBreakersCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'breakers <action> [origin]',
    'circuit breakers of the target origins: list the open ones, show or reset one',
    (y) =>
      withJson(y)
        .positional('action', {
          choices: ['list', 'show', 'reset'] as const,
          describe:
            'list: held origins, then the other open and half-open ones; show: the state of one origin; ' +
            'reset: close the breaker of one origin and end its hold (its next call goes through)',
        })
        .positional('origin', {
          type: 'string',
          describe:
            'show, reset: the origin or any URL on it (https://api.x.com means https://api.x.com:443)',
        })
        .option('limit', { type: 'number', default: 1_000, describe: 'list: at most this many origins' })
        .example('$0 breakers list', 'which targets are being refused, and until when')
        .example('$0 breakers reset https://api.partner.example', 'the partner is back: stop waiting')
        .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => {
      const args = argv as unknown as BreakersArgs;
      const config = configFrom(argv);
      const logger = commandLogger(config);
      const redis = commandRedis(config, logger);
      try {
        await runAction(breakerFromConfig(config, redis, { stateCacheMs: 0 }), { ...args, config });
      } finally {
        redis.disconnect();
      }
    },
  );
}

async function runAction(breaker: CircuitBreaker, args: BreakersArgs): Promise<void> {
  if (args.action === 'list') return list(breaker, args);
  const origin = originArg(args.origin, args.action);
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
