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
  /** The local permission granted (ms): the origin is free (see gate-1.lua); 0 = none. */
  freeMs: number;
}

export interface GateArgs {
  maxLocalWaitMs: number;
  ttlMs: number;
  /** The slot reserved for the task when it was sent back (Redis epoch ms); 0 = none. */
  reservedMs: number;
  bookAheadMs: number;
  /** Calls dispatched on the local permission since last told. */
  dispatched: number;
  /** The local permission asked for (ms); 0 = none. */
  freeMs: number;
  /** Whose call (meta.client; '' = none): its return lane is its own. */
  client: string;
  /** The client's weight: its share of the returns. */
  weight: number;
}

/** One answer of a batch (report-1.lua applies them in order). */
export interface ReportAnswer {
  kind: 0 | 1 | 2;
  holdMs: number;
  ceilingPerSec: number | undefined;
  latencyUs: number;
  /** Calls in flight to the origin when this one was granted, itself included (0 = unknown). */
  inFlight: number;
  /** The call took the last slot the limit allowed: its latency may show a queue of ours. */
  full: boolean;
}

export interface ReportArgs {
  /** The reporting process's event-loop lag (µs): its answers are read that much late. */
  lagUs: number;
  maxLimit: number;
  ttlMs: number;
  /** Calls dispatched on the local permission since last told. */
  dispatched: number;
  /** The local permission asked for (ms); 0 = none. */
  freeMs: number;
  /** Where the origin's end of freedom is announced; '' = nowhere. */
  channel: string;
  /** This pacer's id: the executors applying the limit are counted by their reports. */
  reporter: string;
}

export interface ReportReply {
  limit: number;
  rate: number | undefined;
  holdMs: number;
  throttled: boolean;
}

export interface ReportBatchReply {
  /** One per answer, in order. */
  replies: ReportReply[];
  /** The local permission granted (ms); 0 = none. */
  freeMs: number;
}

export interface PacingScripts {
  gate(key: string, args: GateArgs): Promise<GateReply>;
  /** The answers of one origin, applied in order: one script call. */
  report(key: string, args: ReportArgs, answers: readonly ReportAnswer[]): Promise<ReportBatchReply>;
}

const fromMilli = (value: number | undefined) => (value ? value / 1000 : undefined);
const whole = (value: number) => Math.max(0, Math.round(value));

export function loadPacingScripts(redis: RedisClient): PacingScripts {
  const run = luaScripts<'gate' | 'report'>(redis, PACING_COMMANDS, 1);
  return {
    async gate(key, a) {
      const reply = (await run(
        'gate',
        [key],
        [
          a.maxLocalWaitMs,
          a.ttlMs,
          a.reservedMs,
          a.bookAheadMs,
          whole(a.dispatched),
          whole(a.freeMs),
          a.client,
          a.weight,
        ],
      )) as number[];
      const [admitted, waitMs = 0, limit, rate, slotMs = 0, freeMs = 0] = reply;
      return {
        admitted: admitted === 1,
        waitMs,
        limit: fromMilli(limit),
        rate: fromMilli(rate),
        slotMs,
        freeMs,
      };
    },
    async report(key, a, answers) {
      const args: Array<number | string> = [
        a.maxLimit,
        a.ttlMs,
        whole(a.lagUs),
        whole(a.dispatched),
        whole(a.freeMs),
        a.channel,
        a.reporter,
      ];
      for (const answer of answers)
        args.push(
          answer.kind,
          whole(answer.holdMs),
          Math.round((answer.ceilingPerSec ?? 0) * 1000),
          whole(answer.latencyUs),
          answer.full ? 1 : 0,
          whole(answer.inFlight),
        );
      const reply = (await run('report', [key], args)) as number[];
      const replies: ReportReply[] = [];
      for (let i = 0; i < answers.length; i++) {
        const [limit = 0, rate, holdMs = 0, throttled] = reply.slice(i * 4, i * 4 + 4);
        replies.push({ limit: limit / 1000, rate: fromMilli(rate), holdMs, throttled: throttled === 1 });
      }
      return { replies, freeMs: reply[answers.length * 4] ?? 0 };
    },
  };
}
