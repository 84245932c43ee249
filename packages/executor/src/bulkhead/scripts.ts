import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';

/** `commands/acquire-1.lua`, read once per process. */
const BULKHEAD_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'bulkhead');

export interface AcquireReply {
  granted: boolean;
  /** Leases held on the origin (when refused). */
  inFlight: number;
  /** Age of the oldest of them (when refused). */
  oldestAgeMs: number;
}

export interface BulkheadScripts {
  /** Takes a slot of the origin's ZSET `key` as `lease` for `leaseMs`, if fewer than `max` are held. */
  acquire(key: string, max: number, leaseMs: number, lease: string): Promise<AcquireReply>;
}

export function loadBulkheadScripts(redis: RedisClient): BulkheadScripts {
  const run = luaScripts<'acquire'>(redis, BULKHEAD_COMMANDS, 1);
  return {
    async acquire(key, max, leaseMs, lease) {
      const [granted, inFlight = 0, oldestAgeMs = 0] = (await run(
        'acquire',
        [key],
        [max, leaseMs, lease],
      )) as number[];
      return { granted: granted === 1, inFlight, oldestAgeMs };
    },
  };
}
