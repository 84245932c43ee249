import { breakerFromConfig } from '@requester/policies';
import type { Argv } from 'yargs';
import {
  type Cell,
  type ConfigFrom,
  commandLogger,
  commandRedis,
  EXIT_CODES_HELP,
  printJson,
  printTable,
  withJson,
} from '../../commands/common.ts';
import { humanTime } from '../format.ts';
import { listOrigins, type OriginParts, type OriginView, originQuery, showOrigin } from './index.ts';

const ABOUT =
  'A target origin (scheme://host:port) as every executor shares it in Redis: its circuit breaker, ' +
  'calls in flight against MAX_WORKERS_PER_ORIGIN (deployment-wide with ORIGIN_CONCURRENCY_SCOPE=cluster), ' +
  'its pace and learnt concurrency limit, its pause, and its calls of the last 15 minutes ' +
  '(attempts, success rate, p50/p95 latency: the executors flush their counts every 5 s). ' +
  'Listed: origins called within 2 hours, with an open breaker, or paused.';

/** `requester origins list|show <origin>`. */
export function registerOriginsCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'origins [action] [origin]',
    'target origins across the deployment: breaker, in flight, pace, pause, calls and latency',
    (y) =>
      withJson(y)
        .positional('action', {
          choices: ['list', 'show'] as const,
          default: 'list' as const,
          describe: 'list: every origin known; show: one origin',
        })
        .positional('origin', { type: 'string', describe: 'show: the origin or any URL on it' })
        .option('limit', { type: 'number', default: 200, describe: 'list: at most this many origins' })
        .example('$0 origins', 'every target: state and latency')
        .example('$0 origins show https://api.partner.example --json', 'one origin, as JSON')
        .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => {
      const config = configFrom(argv);
      const logger = commandLogger(config);
      const redis = commandRedis(config, logger);
      try {
        const parts: OriginParts = {
          redis,
          config,
          breaker: breakerFromConfig(config, redis, { stateCacheMs: 0 }),
        };
        const rows =
          argv.action === 'show'
            ? [await showOrigin(parts, originQuery(argv.origin))]
            : await listOrigins(parts, argv.limit);
        if (argv.json) return printJson(argv.action === 'show' ? rows[0] : rows);
        if (rows.length === 0) {
          process.stdout.write('no origin called within 2 hours, none open, none paused\n');
          return;
        }
        printTable(rows.map(originRow));
      } finally {
        redis.disconnect();
      }
    },
  );
}

function originRow(o: OriginView): Record<string, Cell> {
  const percent = o.calls.successRate === null ? '-' : `${(o.calls.successRate * 100).toFixed(1)}%`;
  return {
    origin: o.origin,
    breaker:
      o.breaker.state === 'closed'
        ? 'closed'
        : `${o.breaker.state} until ${humanTime(Date.parse(o.breaker.openUntil ?? ''))}`,
    'in flight': `${o.bulkhead.inFlight ?? '?'}/${o.bulkhead.cap}`,
    pace: o.pace.rate === null ? '-' : `${o.pace.rate.toFixed(1)}/s`,
    held: o.pace.holdUntil === null ? '-' : humanTime(Date.parse(o.pace.holdUntil)),
    paused: o.pause ? (o.pause.until ? `until ${humanTime(Date.parse(o.pause.until))}` : 'yes') : '-',
    attempts: o.calls.attempts,
    success: percent,
    p50: o.calls.p50Ms === null ? '-' : `${o.calls.p50Ms}ms`,
    p95: o.calls.p95Ms === null ? '-' : `${o.calls.p95Ms}ms`,
  };
}
