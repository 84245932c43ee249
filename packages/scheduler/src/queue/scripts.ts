import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RedisClient } from '@requester/shared';
import { SHARD_KEY_NAMES } from './keys.ts';

const COMMANDS_DIR = join(import.meta.dirname, 'commands');
const INCLUDE = /^--- @include "([\w/-]+)"\s*$/gm;

/** Inlines `--- @include "includes/x"` lines (BullMQ's convention), each include at most once. */
function expand(source: string, seen: Set<string>): string {
  return source.replace(INCLUDE, (_line, name: string) => {
    if (seen.has(name)) return '';
    seen.add(name);
    return expand(readFileSync(join(COMMANDS_DIR, `${name}.lua`), 'utf8'), seen);
  });
}

export interface QueueScript {
  /** The ioredis command name, e.g. `fairQueueLease`. */
  command: string;
  numberOfKeys: number;
  lua: string;
}

/** Every `commands/<op>-<numKeys>.lua`, expanded. Read once per process. */
export const QUEUE_SCRIPTS: ReadonlyMap<string, QueueScript> = new Map(
  readdirSync(COMMANDS_DIR)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => {
      const match = /^(\w+)-(\d+)\.lua$/.exec(file);
      if (!match?.[1] || !match[2]) throw new Error(`queue script ${file} is not named <op>-<numKeys>.lua`);
      const op = match[1];
      const numberOfKeys = Number(match[2]);
      if (numberOfKeys !== SHARD_KEY_NAMES.length) throw new Error(`queue script ${file}: expected 11 keys`);
      const lua = expand(readFileSync(join(COMMANDS_DIR, file), 'utf8'), new Set());
      const command = `fairQueue${op[0]?.toUpperCase()}${op.slice(1)}`;
      return [op, { command, numberOfKeys, lua }] as const;
    }),
);

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
  | 'verify';

type Reply = Array<string | number>;
type ScriptFn = (...keysAndArgs: Array<string | number>) => Promise<Reply>;

/**
 * Defines the queue scripts on a client (once per client: EVALSHA, loaded on first use and after a
 * restart by ioredis) and returns a caller for each.
 */
export function loadScripts(
  redis: RedisClient,
): (name: ScriptName, keys: string[], args: Array<string | number>) => Promise<Reply> {
  const client = redis as unknown as Record<string, ScriptFn | undefined>;
  for (const script of QUEUE_SCRIPTS.values()) {
    if (typeof client[script.command] !== 'function') {
      redis.defineCommand(script.command, { numberOfKeys: script.numberOfKeys, lua: script.lua });
    }
  }
  return (name, keys, args) => {
    const script = QUEUE_SCRIPTS.get(name);
    const fn = script ? client[script.command] : undefined;
    if (!script || !fn) throw new Error(`unknown queue script ${name}`);
    return fn.call(redis, ...keys, ...args);
  };
}
