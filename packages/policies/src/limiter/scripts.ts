import { join } from 'node:path';
import { MAX_LIMITER_RATES } from '@requester/shared/contract';
import { RequesterError } from '@requester/shared/errors';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';
import type { LimiterCall } from './spec.ts';

/** One command per algorithm (`commands/<op>-<n|1>.lua`, see spec.ts), read once per process. */
const LIMITER_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'rateLimiter');

/**
 * `allowed`: consumed from every window. `limited`: nothing consumed; retry after `retryAfterMs`.
 * `oversized`: the cost exceeds a window's value, so no wait can ever admit it: answer with an
 * error instead of rescheduling.
 */
export type LimitOutcome = 'allowed' | 'limited' | 'oversized';

export interface TakeReply {
  outcome: LimitOutcome;
  /** When limited: the longest wait over the denying windows (ms, >= 1); else 0. */
  retryAfterMs: number;
  /** Calls of cost 1 the tightest window still admits (after this take when allowed). */
  remaining: number;
  /** The Redis clock at the decision (ms since the epoch, microsecond fraction): the queue's clock. */
  atMs: number;
  /** An allowed two-phase take (a sliding log with a dispatch budget): the head of its pending entries. */
  reservation?: string;
}

export interface LimiterScripts {
  take(call: LimiterCall): Promise<TakeReply>;
  /**
   * Several takes in one round trip, decided in array order. On one node it is a pipeline; on a
   * cluster the takes go out together and ioredis pipelines them per node (the limiters live in
   * different slots, which one cluster pipeline may not span).
   */
  takeMany(calls: readonly LimiterCall[]): Promise<TakeReply[]>;
  /** Settles a two-phase take (commands/confirmLog-1.lua): `sentUs` -1 = never sent. Entries settled. */
  confirm(logKey: string, reservation: string, cost: number, sentUs: number): Promise<number>;
}

const OUTCOMES: ReadonlyMap<number, LimitOutcome> = new Map([
  [1, 'allowed'],
  [0, 'limited'],
  [-1, 'oversized'],
]);

function decode(reply: unknown): TakeReply {
  const [code, retryAfterMs, remaining, nowUs, reservation] = reply as [
    number,
    number,
    number,
    number,
    string,
  ];
  const outcome = OUTCOMES.get(Number(code));
  if (!outcome)
    throw new RequesterError('internal', `rate limiter: unexpected reply ${JSON.stringify(reply)}`);
  return {
    outcome,
    retryAfterMs: Number(retryAfterMs),
    remaining: Number(remaining),
    atMs: Number(nowUs) / 1000,
    ...(reservation ? { reservation: String(reservation) } : {}),
  };
}

export function loadLimiterScripts(redis: RedisClient): LimiterScripts {
  // One key per window, and one for the calendar quota.
  const run = luaScripts<string>(redis, LIMITER_COMMANDS, MAX_LIMITER_RATES + 1);
  const send = (call: LimiterCall) => run(call.op, call.keys, call.args);
  const pipelined = async (calls: readonly LimiterCall[]): Promise<unknown[]> => {
    const pipeline = redis.pipeline();
    for (const call of calls) run(call.op, call.keys, call.args, pipeline);
    const results = (await pipeline.exec()) ?? [];
    return results.map(([err, reply]) => {
      if (err) throw err;
      return reply;
    });
  };
  return {
    take: async (call) => decode(await send(call)),
    async takeMany(calls) {
      if (calls.length === 0) return [];
      const replies = await (redis.isCluster ? Promise.all(calls.map(send)) : pipelined(calls));
      return replies.map(decode);
    },
    confirm: async (logKey, reservation, cost, sentUs) =>
      Number(await run('confirmLog', [logKey], [reservation, cost, sentUs])),
  };
}
