import { breakerFromConfig, type CircuitBreaker, originOf } from '@requester/policies';
import { UsageError } from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type ConfigFrom,
  commandLogger,
  commandRedis,
  EXIT_CODES_HELP,
  humanTime,
  isoTime,
  printFields,
  printJson,
  printTable,
  progress,
  withJson,
} from './common.ts';

interface BreakersArgs {
  action: 'list' | 'show' | 'reset';
  origin?: string;
  limit: number;
  json: boolean;
}

const ABOUT =
  'One circuit breaker per target origin (scheme://host:port), shared by every executor in Redis: ' +
  'BREAKER_FAILURE_THRESHOLD failures in a row open it for BREAKER_OPEN_DURATION (doubling while ' +
  'probes fail, up to BREAKER_MAX_OPEN_DURATION); then one probe call decides. reset closes it at ' +
  'once; executors that cached the open state follow within BREAKER_STATE_CACHE.';

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
            'list: open and half-open origins, latest open-until first; show: the state of one origin; ' +
            'reset: close the breaker of one origin (its next call goes through)',
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
        await runAction(breakerFromConfig(config, redis, { stateCacheMs: 0 }), args);
      } finally {
        redis.disconnect();
      }
    },
  );
}

async function runAction(breaker: CircuitBreaker, args: BreakersArgs): Promise<void> {
  if (args.action === 'list') return list(breaker, args);
  const origin = originArg(args);
  if (args.action === 'show') return show(breaker, origin, args.json);
  const existed = await breaker.reset(origin);
  progress(
    existed
      ? `closed the breaker of ${origin}; executors follow within BREAKER_STATE_CACHE`
      : `${origin} had no breaker state (closed already)`,
  );
  if (args.json) printJson({ origin, reset: existed });
}

async function list(breaker: CircuitBreaker, args: BreakersArgs): Promise<void> {
  if (!Number.isInteger(args.limit) || args.limit < 1)
    throw new UsageError(`--limit must be a whole number ≥ 1, got ${args.limit}`);
  const open = await breaker.openOrigins(args.limit);
  const rows = await Promise.all(
    open.map(async (o) => ({ ...o, snapshot: await breaker.snapshot(o.origin) })),
  );
  if (args.json)
    return printJson(
      rows.map(({ origin, state, retryAtMs, openSinceMs, snapshot }) => ({
        origin,
        state,
        opensInARow: snapshot.opens,
        openSince: isoTime(openSinceMs),
        openUntil: isoTime(retryAtMs),
        slots: snapshot.slots,
      })),
    );
  printTable(
    rows.map(({ origin, state, retryAtMs, openSinceMs, snapshot }) => ({
      origin,
      state,
      opens: snapshot.opens,
      openSince: humanTime(openSinceMs),
      openUntil: humanTime(retryAtMs),
      probing: snapshot.slots > 0,
    })),
  );
}

async function show(breaker: CircuitBreaker, origin: string, json: boolean): Promise<void> {
  const s = await breaker.snapshot(origin);
  if (json)
    return printJson({
      origin,
      state: s.state,
      failures: s.failures ?? null,
      opensInARow: s.opens,
      openSince: isoTime(s.openSinceMs),
      openUntil: isoTime(s.openUntilMs),
      slots: s.slots,
    });
  printFields({
    origin,
    state: s.state,
    'failures in a row': s.failures ?? (s.state === 'closed' ? 'not seen (or forgotten)' : '-'),
    'opens in a row': s.opens,
    'open since': humanTime(s.openSinceMs),
    'open until': humanTime(s.openUntilMs),
    'trial slots held': s.slots,
  });
}

function originArg(args: BreakersArgs): string {
  if (!args.origin) throw new UsageError(`breakers ${args.action} needs an origin, e.g. https://api.x.com`);
  try {
    return originOf(args.origin);
  } catch {
    throw new UsageError(`not an origin or URL: ${JSON.stringify(args.origin)} (e.g. https://api.x.com)`);
  }
}
