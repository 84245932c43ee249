import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RedisClient } from '@requester/shared';
import type { CacheKeys } from './keys.ts';

const COMMANDS_DIR = join(import.meta.dirname, 'commands');

function lua(file: string): string {
  return readFileSync(join(COMMANDS_DIR, file), 'utf8');
}

/** Read once per process; defined on each client as an EVALSHA command. */
const SCRIPTS = {
  responseCacheAcquire: { numberOfKeys: 2, lua: lua('acquire-2.lua') },
  responseCacheSettle: { numberOfKeys: 2, lua: lua('settle-2.lua') },
  responseCacheExtend: { numberOfKeys: 1, lua: lua('extend-1.lua') },
};

type Reply = Array<string | number>;
type ScriptFn = (...keysAndArgs: Array<string | number>) => Promise<Reply | number>;

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
  const client = redis as unknown as Record<string, ScriptFn | undefined>;
  for (const [command, definition] of Object.entries(SCRIPTS)) {
    if (typeof client[command] !== 'function') redis.defineCommand(command, definition);
  }
  const run = (command: keyof typeof SCRIPTS, ...keysAndArgs: Array<string | number>) =>
    (client[command] as ScriptFn).call(redis, ...keysAndArgs);
  return {
    async acquire(keys, token, lockTtlMs) {
      const reply = (await run('responseCacheAcquire', keys.value, keys.lock, token, lockTtlMs)) as Reply;
      if (reply[0] === 1) return { kind: 'hit', entry: String(reply[1]) };
      if (reply[0] === 2) return { kind: 'won' };
      return { kind: 'busy', lockPttlMs: Number(reply[1]) };
    },
    async settle(keys, token, entry, ttlMs) {
      const reply = (await run(
        'responseCacheSettle',
        keys.value,
        keys.lock,
        token,
        keys.channel,
        entry ?? '',
        ttlMs,
      )) as Reply;
      return { stored: reply[0] === 1, released: reply[1] === 1 };
    },
    async extend(keys, token, lockTtlMs) {
      return (await run('responseCacheExtend', keys.lock, token, lockTtlMs)) === 1;
    },
  };
}
