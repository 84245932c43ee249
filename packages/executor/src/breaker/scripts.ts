import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RedisClient } from '@requester/shared';

const COMMANDS_DIR = join(import.meta.dirname, 'commands');
const INCLUDE = /^--- @include "([\w/-]+)"\s*$/gm;

function expand(source: string): string {
  return source.replace(INCLUDE, (_line, name: string) =>
    readFileSync(join(COMMANDS_DIR, `${name}.lua`), 'utf8'),
  );
}

const SCRIPTS = {
  admit: { command: 'breakerAdmit', file: 'admit-2.lua', numberOfKeys: 2 },
  record: { command: 'breakerRecord', file: 'record-2.lua', numberOfKeys: 2 },
} as const;

export type BreakerScript = keyof typeof SCRIPTS;
type ScriptFn = (...keysAndArgs: Array<string | number>) => Promise<number[]>;

const LUA = new Map(
  Object.entries(SCRIPTS).map(([name, s]) => [
    name,
    expand(readFileSync(join(COMMANDS_DIR, s.file), 'utf8')),
  ]),
);

/**
 * Defines the breaker scripts on a client once (EVALSHA; ioredis reloads them after a Redis
 * restart) and returns a caller.
 */
export function loadBreakerScripts(
  redis: RedisClient,
): (name: BreakerScript, keys: readonly string[], args: ReadonlyArray<string | number>) => Promise<number[]> {
  const client = redis as unknown as Record<string, ScriptFn | undefined>;
  for (const [name, script] of Object.entries(SCRIPTS)) {
    if (typeof client[script.command] !== 'function') {
      redis.defineCommand(script.command, { numberOfKeys: script.numberOfKeys, lua: LUA.get(name) ?? '' });
    }
  }
  return (name, keys, args) => {
    const fn = client[SCRIPTS[name].command];
    if (!fn) throw new Error(`breaker script ${name} is not defined`);
    return fn.call(redis, ...keys, ...args);
  };
}
