import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';

/** `commands/<op>-3.lua`, read once per process. */
const BULKHEAD_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'bulkhead');

/**
 * The keys of one origin's slots: its slots ZSET and, in the same Redis Cluster slot, the line of
 * executors waiting for one (acquire-3.lua). The slots key keeps its name (a rolling upgrade's
 * older executors count the same slots); the line's keys take it as their hash tag, unless it
 * carries a tag of its own (a REDIS_PREFIX with braces), which they then share.
 */
export function originKeys(slots: string): [slots: string, waiting: string, seen: string] {
  const open = slots.indexOf('{');
  const tagged = open >= 0 && slots.indexOf('}', open + 1) > open + 1;
  const base = tagged ? slots : `{${slots}}`;
  return [slots, `${base}:waiting`, `${base}:seen`];
}

export interface AcquireReply {
  granted: boolean;
  /** Leases held on the origin (when refused). */
  inFlight: number;
  /** Age of the oldest of them (when refused for a full origin; 0 when yielding a free slot). */
  oldestAgeMs: number;
}

/** Who asks, for the line of executors (acquire-3.lua). */
export interface LineMember {
  /** This executor's id (unique per process and bulkhead). */
  executor: string;
  /** An executor that has not asked for this long is out of the line. */
  staleMs: number;
  /** The wake channels' prefix: an executor hears its turn on `<prefix><executor>`. */
  channelPrefix: string;
}

export interface BulkheadScripts {
  /**
   * Takes a slot of the origin whose slots ZSET is `key` as `lease` for `leaseMs`, if fewer than
   * `max` are held and no executor ahead in the line waits for it; `joins`: refused, this executor
   * joins the line (it has tasks waiting).
   */
  acquire(key: string, max: number, leaseMs: number, lease: string, joins: boolean): Promise<AcquireReply>;
  /** Frees `lease` and tells the executors first in the line (this one asks again by itself). */
  release(key: string, lease: string, max: number): Promise<unknown>;
  /** This executor leaves the line of `key` (nothing of it waits any more). */
  leave(key: string, max: number): Promise<unknown>;
}

export function loadBulkheadScripts(redis: RedisClient, member: LineMember): BulkheadScripts {
  const run = luaScripts<'acquire' | 'release' | 'leave'>(redis, BULKHEAD_COMMANDS, 3);
  const { executor, staleMs, channelPrefix } = member;
  return {
    async acquire(key, max, leaseMs, lease, joins) {
      const [granted, inFlight = 0, oldestAgeMs = 0] = (await run('acquire', originKeys(key), [
        max,
        leaseMs,
        lease,
        executor,
        joins ? 1 : 0,
        staleMs,
        channelPrefix,
      ])) as number[];
      return { granted: granted === 1, inFlight, oldestAgeMs };
    },
    release: (key, lease, max) =>
      run('release', originKeys(key), [lease, max, staleMs, channelPrefix, executor]),
    leave: (key, max) => run('leave', originKeys(key), [executor, max, channelPrefix]),
  };
}
