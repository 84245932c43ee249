import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';

/** `commands/admit-2.lua` and `commands/record-2.lua`, read once per process. */
const BREAKER_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'breaker');

/** Times are the Redis clock (`nowMs` is its reading at the call); `stateCode` indexes STATES. */
export interface AdmitReply {
  admitted: boolean;
  probe: boolean;
  retryAtMs: number;
  nowMs: number;
  stateCode: number;
  /** The origin is known healthy: the answer may be cached. */
  proven: boolean;
  /** 0 not held, 1 failing-held, 2 held at the receiver's request (includes/state.lua). */
  heldCode: number;
}

export interface RecordReply {
  stateCode: number;
  retryAtMs: number;
  nowMs: number;
  proven: boolean;
  /** Indexes TRANSITIONS; 0: none. */
  transition: number;
  heldCode: number;
  /** 0 none, 1 the hold began (or became an opt-out), 2 it ended. */
  holdChange: number;
  /** Redis ms; 0 = not held. */
  heldSinceMs: number;
  /** The run of failures: its count and start (Redis ms), 0 when none. */
  runFailures: number;
  runSinceMs: number;
}

export interface AdmitArgs {
  threshold: number;
  trialLeaseMs: number;
  ticket: string;
  busyRetryMs: number;
  holdPeriodMs: number;
}

export interface RecordArgs {
  threshold: number;
  openMs: number;
  maxOpenMs: number;
  stateTtlMs: number;
  success: boolean;
  probe: boolean;
  ticket: string;
  origin: string;
  holdAfterMs: number;
  holdFailures: number;
  optOut: boolean;
  holdPeriodMs: number;
}

export interface BreakerScripts {
  admit(keys: readonly string[], args: AdmitArgs): Promise<AdmitReply>;
  record(keys: readonly string[], args: RecordArgs): Promise<RecordReply>;
}

/** Defines the breaker scripts on a client once; `keys` are the origin's (`originKeys`). */
export function loadBreakerScripts(redis: RedisClient): BreakerScripts {
  const run = luaScripts<'admit' | 'record'>(redis, BREAKER_COMMANDS, 2);
  return {
    async admit(keys, a) {
      const reply = (await run('admit', keys, [
        a.threshold,
        a.trialLeaseMs,
        a.ticket,
        a.busyRetryMs,
        a.holdPeriodMs,
      ])) as number[];
      const [admitted, probe, retryAtMs = 0, nowMs = 0, stateCode = 0, proven, heldCode = 0] = reply;
      return {
        admitted: admitted === 1,
        probe: probe === 1,
        retryAtMs,
        nowMs,
        stateCode,
        proven: proven === 1,
        heldCode,
      };
    },
    async record(keys, a) {
      const reply = (await run('record', keys, [
        a.threshold,
        a.openMs,
        a.maxOpenMs,
        a.stateTtlMs,
        a.success ? 1 : 0,
        a.probe ? 1 : 0,
        a.ticket,
        a.origin,
        a.holdAfterMs,
        a.holdFailures,
        a.optOut ? 1 : 0,
        a.holdPeriodMs,
      ])) as number[];
      const [stateCode = 0, retryAtMs = 0, nowMs = 0, proven, transition = 0] = reply;
      const [heldCode = 0, holdChange = 0, heldSinceMs = 0, runFailures = 0, runSinceMs = 0] = reply.slice(5);
      return {
        stateCode,
        retryAtMs,
        nowMs,
        proven: proven === 1,
        transition,
        heldCode,
        holdChange,
        heldSinceMs,
        runFailures,
        runSinceMs,
      };
    },
  };
}
