import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';

/** `commands/gate-1.lua` and `commands/report-1.lua`, read once per process. */
const PACING_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'pacing');

export interface GateReply {
  admitted: boolean;
  /** Admitted: sleep this long, then call. Refused: come back in this long. */
  waitMs: number;
  /** Adaptive concurrency limit; undefined = not learnt yet. */
  limit: number | undefined;
  /** Pace (calls/s); undefined = unpaced. */
  rate: number | undefined;
  /** Refused: the slot reserved for the task (Redis epoch ms); 0 otherwise (beyond the booking horizon). */
  slotMs: number;
}

export interface ReportArgs {
  kind: 0 | 1 | 2;
  holdMs: number;
  ceilingPerSec: number | undefined;
  latencyUs: number;
  /** The reporting process's event-loop lag (µs): its answers are read that much late. */
  lagUs: number;
  /** Calls in flight to the origin when this one was granted, itself included (0 = unknown). */
  inFlight: number;
  /** The call took the last slot the limit allowed: its latency may show a queue of ours. */
  full: boolean;
  maxLimit: number;
  ttlMs: number;
}

export interface ReportReply {
  limit: number;
  rate: number | undefined;
  holdMs: number;
  throttled: boolean;
}

export interface PacingScripts {
  gate(
    key: string,
    maxLocalWaitMs: number,
    ttlMs: number,
    reservedMs: number,
    bookAheadMs: number,
  ): Promise<GateReply>;
  report(key: string, args: ReportArgs): Promise<ReportReply>;
}

const fromMilli = (value: number | undefined) => (value ? value / 1000 : undefined);

export function loadPacingScripts(redis: RedisClient): PacingScripts {
  const run = luaScripts<'gate' | 'report'>(redis, PACING_COMMANDS, 1);
  return {
    async gate(key, maxLocalWaitMs, ttlMs, reservedMs, bookAheadMs) {
      const reply = (await run('gate', [key], [maxLocalWaitMs, ttlMs, reservedMs, bookAheadMs])) as number[];
      const [admitted, waitMs = 0, limit, rate, slotMs = 0] = reply;
      return { admitted: admitted === 1, waitMs, limit: fromMilli(limit), rate: fromMilli(rate), slotMs };
    },
    async report(key, a) {
      const [limit = 0, rate, holdMs = 0, throttled] = (await run(
        'report',
        [key],
        [
          a.kind,
          Math.max(0, Math.round(a.holdMs)),
          Math.round((a.ceilingPerSec ?? 0) * 1000),
          Math.max(0, Math.round(a.latencyUs)),
          a.maxLimit,
          a.ttlMs,
          Math.max(0, Math.round(a.lagUs)),
          a.full ? 1 : 0,
          Math.max(0, Math.round(a.inFlight)),
        ],
      )) as number[];
      return { limit: limit / 1000, rate: fromMilli(rate), holdMs, throttled: throttled === 1 };
    },
  };
}
