import { join } from 'node:path';
import { defineLuaCommands, type RedisClient, readLuaCommands } from '@requester/shared';

/** `commands/admit-2.lua` and `commands/record-2.lua`, read once per process. */
const BREAKER_COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'breaker');

export type BreakerScript = 'admit' | 'record';

/** Defines the breaker scripts on a client once and returns a caller. */
export function loadBreakerScripts(
  redis: RedisClient,
): (name: BreakerScript, keys: readonly string[], args: ReadonlyArray<string | number>) => Promise<number[]> {
  const call = defineLuaCommands(redis, BREAKER_COMMANDS, 2);
  return (name, keys, args) => call(redis, name, [...keys], [...args]) as Promise<number[]>;
}
