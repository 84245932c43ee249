import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';

/** `commands/admit-5.lua` and `commands/record-5.lua`, read once per process. */
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
  /** The refusal, or the hold, is the caller's own breaker's (not the origin's). */
  callerScope: boolean;
  /** The call is the half-open probe of the caller's own breaker. */
  callerProbe: boolean;
}

/** What `record` did in one scope (the origin's, or a caller's). */
export interface ScopeReply {
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

/** The origin's reply, and the caller's when the call had one. */
export interface RecordReply extends ScopeReply {
  caller?: ScopeReply | undefined;
}

export interface AdmitArgs {
  threshold: number;
  trialLeaseMs: number;
  ticket: string;
  busyRetryMs: number;
  holdPeriodMs: number;
  /** The caller's id in its keys ('' = none: the origin's breaker alone). */
  caller: string;
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
  /** As in AdmitArgs. */
  caller: string;
  /** The call was admitted as the caller's own breaker's probe. */
  callerProbe: boolean;
}

export interface BreakerScripts {
  admit(keys: readonly string[], args: AdmitArgs): Promise<AdmitReply>;
  record(keys: readonly string[], args: RecordArgs): Promise<RecordReply>;
}

/** Defines the breaker scripts on a client once; `keys` are the origin's (`originKeys`). */
export function loadBreakerScripts(redis: RedisClient): BreakerScripts {
  const run = luaScripts<'admit' | 'record'>(redis, BREAKER_COMMANDS, 5);
  return {
    async admit(keys, a) {
      const reply = (await run('admit', keys, [
        a.threshold,
        a.trialLeaseMs,
        a.ticket,
        a.busyRetryMs,
        a.holdPeriodMs,
        a.caller,
      ])) as number[];
      const [admitted, probe, retryAtMs = 0, nowMs = 0, stateCode = 0, proven, heldCode = 0] = reply;
      const [scope, callerProbe] = reply.slice(7);
      return {
        admitted: admitted === 1,
        probe: probe === 1,
        retryAtMs,
        nowMs,
        stateCode,
        proven: proven === 1,
        heldCode,
        callerScope: scope === 1,
        callerProbe: callerProbe === 1,
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
        a.caller,
        a.callerProbe ? 1 : 0,
      ])) as number[];
      const caller = reply.length >= 20 ? scopeReply(reply.slice(10)) : undefined;
      return { ...scopeReply(reply), caller };
    },
  };
}

function scopeReply(reply: readonly number[]): ScopeReply {
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
}
