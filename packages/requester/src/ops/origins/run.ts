import { breakerFromConfig } from '@requester/policies';
import { commandLogger, commandRedis } from '../../commands/clients.ts';
import { type Cell, type ConfigFrom, printJson, printTable } from '../../commands/common.ts';
import { humanTime } from '../format.ts';
import { listOrigins, type OriginParts, type OriginView, originQuery, showOrigin } from './index.ts';

/** `requester origins`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function origins(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
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
        ? [await showOrigin(parts, originQuery(argv.origin as string | undefined))]
        : await listOrigins(parts, argv.limit as number);
    if (argv.json) return printJson(argv.action === 'show' ? rows[0] : rows);
    if (rows.length === 0) {
      process.stdout.write('no origin called within 2 hours, none open, none paused\n');
      return;
    }
    printTable(rows.map(originRow));
  } finally {
    redis.disconnect();
  }
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
