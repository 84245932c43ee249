import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';
import type { CacheKeys } from './keys.ts';

/** `commands/acquire-2.lua`, `settle-2.lua`, `extend-1.lua`, read once per process. */
const CACHE_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'responseCache');

type Reply = Array<string | number>;

export type AcquireReply =
  | { kind: 'hit'; entry: string }
  | { kind: 'won' }
  | { kind: 'busy'; lockPttlMs: number }
  /** The entry, or the fill in progress, answers another request sharing the key. */
  | { kind: 'other' };

/**
 * One fill's hold on a key: the identity of the request it answers (`requestIdentity`) and a
 * token unique to the fill. The lock's value is `<identity>\n<token>`.
 */
export interface FillLock {
  identity: string;
  token: string;
}

export interface CacheScripts {
  acquire(keys: CacheKeys, lock: FillLock, lockTtlMs: number): Promise<AcquireReply>;
  /** `entry` undefined: nothing to store (only the lock is released). */
  settle(
    keys: CacheKeys,
    lock: FillLock,
    entry: string | undefined,
    ttlMs: number,
  ): Promise<{ stored: boolean; released: boolean }>;
  extend(keys: CacheKeys, lock: FillLock, lockTtlMs: number): Promise<boolean>;
}

const identityLine = (lock: FillLock) => `${lock.identity}\n`;
const lockValue = (lock: FillLock) => `${lock.identity}\n${lock.token}`;

export function loadCacheScripts(redis: RedisClient): CacheScripts {
  const run = luaScripts<'acquire' | 'settle' | 'extend'>(redis, CACHE_COMMANDS, 2);
  return {
    async acquire(keys, lock, lockTtlMs) {
      const reply = (await run(
        'acquire',
        [keys.value, keys.lock],
        [lockValue(lock), lockTtlMs, identityLine(lock)],
      )) as Reply;
      if (reply[0] === 1) return { kind: 'hit', entry: String(reply[1]) };
      if (reply[0] === 2) return { kind: 'won' };
      if (reply[0] === 4) return { kind: 'other' };
      return { kind: 'busy', lockPttlMs: Number(reply[1]) };
    },
    async settle(keys, lock, entry, ttlMs) {
      const reply = (await run(
        'settle',
        [keys.value, keys.lock],
        [lockValue(lock), keys.channel, entry ?? '', ttlMs, identityLine(lock)],
      )) as Reply;
      return { stored: reply[0] === 1, released: reply[1] === 1 };
    },
    async extend(keys, lock, lockTtlMs) {
      return (await run('extend', [keys.lock], [lockValue(lock), lockTtlMs])) === 1;
    },
  };
}
