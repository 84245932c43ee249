import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared';
import type { CacheKeys } from './keys.ts';

/** `commands/acquire-2.lua`, `settle-2.lua`, `extend-1.lua`, read once per process. */
const CACHE_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'responseCache');

type Reply = Array<string | number>;

export type AcquireReply =
  | { kind: 'hit'; entry: string }
  | { kind: 'won' }
  | { kind: 'busy'; lockPttlMs: number };

export interface CacheScripts {
  acquire(keys: CacheKeys, token: string, lockTtlMs: number): Promise<AcquireReply>;
  /** `entry` undefined: nothing to store (only the lock is released). */
  settle(
    keys: CacheKeys,
    token: string,
    entry: string | undefined,
    ttlMs: number,
  ): Promise<{ stored: boolean; released: boolean }>;
  extend(keys: CacheKeys, token: string, lockTtlMs: number): Promise<boolean>;
}

export function loadCacheScripts(redis: RedisClient): CacheScripts {
  const run = luaScripts<'acquire' | 'settle' | 'extend'>(redis, CACHE_COMMANDS, 2);
  return {
    async acquire(keys, token, lockTtlMs) {
      const reply = (await run('acquire', [keys.value, keys.lock], [token, lockTtlMs])) as Reply;
      if (reply[0] === 1) return { kind: 'hit', entry: String(reply[1]) };
      if (reply[0] === 2) return { kind: 'won' };
      return { kind: 'busy', lockPttlMs: Number(reply[1]) };
    },
    async settle(keys, token, entry, ttlMs) {
      const reply = (await run(
        'settle',
        [keys.value, keys.lock],
        [token, keys.channel, entry ?? '', ttlMs],
      )) as Reply;
      return { stored: reply[0] === 1, released: reply[1] === 1 };
    },
    async extend(keys, token, lockTtlMs) {
      return (await run('extend', [keys.lock], [token, lockTtlMs])) === 1;
    },
  };
}
