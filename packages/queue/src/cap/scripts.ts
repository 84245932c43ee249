/**
 * The scripts of clients' caps of tasks in flight, apart from the queue's: they take the keys of a
 * client's own slot (`clientCapKeys`), not those of a shard, since a client's tasks are in every shard.
 */
import { join } from 'node:path';
import { luaScripts, type RedisClient, readLuaCommands } from '@requester/shared/redis';

const CAP_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'clientCap');

/** The scripts of clients' caps of tasks in flight (keys: `clientCapKeys`, one slot per client). */
export interface CapScripts {
  /** Slots granted (the first `granted` of `permits`), or null when the client has no cap. */
  acquire(
    keys: { cap: string; held: string },
    holdMs: number,
    permits: readonly string[],
  ): Promise<number | null>;
  extend(held: string, holdMs: number, permits: readonly string[]): Promise<number>;
}

export function loadCapScripts(redis: RedisClient): CapScripts {
  const run = luaScripts<'acquire' | 'extend'>(redis, CAP_COMMANDS, 2);
  return {
    async acquire(keys, holdMs, permits) {
      const granted = Number(await run('acquire', [keys.cap, keys.held], [holdMs, ...permits]));
      return granted < 0 ? null : granted;
    },
    async extend(held, holdMs, permits) {
      return Number(await run('extend', [held], [holdMs, ...permits]));
    },
  };
}
