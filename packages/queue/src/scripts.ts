import { join } from 'node:path';
import { defineLuaCommands, type RedisClient, readLuaCommands } from '@requester/shared';
import { SHARD_KEY_NAMES } from './keys.ts';

/** Every `commands/<op>-11.lua` (each takes the 11 keys of one shard), read once per process. */
const QUEUE_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'fairQueue');
for (const [op, command] of QUEUE_COMMANDS) {
  if (command.numberOfKeys !== SHARD_KEY_NAMES.length) {
    throw new Error(
      `queue script ${op}: expected ${SHARD_KEY_NAMES.length} keys, got ${command.numberOfKeys}`,
    );
  }
}

export type ScriptName =
  | 'publish'
  | 'lease'
  | 'extend'
  | 'ack'
  | 'reject'
  | 'deadLetter'
  | 'reclaim'
  | 'peek'
  | 'info'
  | 'purge'
  | 'retryDead'
  | 'listDead'
  | 'partitions'
  | 'verify';

type Reply = Array<string | number>;

/** Defines the queue scripts on a client (once per client) and returns a caller for each. */
export function loadScripts(
  redis: RedisClient,
): (name: ScriptName, keys: string[], args: Array<string | number>) => Promise<Reply> {
  const call = defineLuaCommands(redis, QUEUE_COMMANDS, SHARD_KEY_NAMES.length);
  return (name, keys, args) => call(redis, name, keys, args) as Promise<Reply>;
}
