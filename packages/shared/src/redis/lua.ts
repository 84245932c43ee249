import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RedisClient } from './client.ts';

/**
 * The one loader of Redis Lua commands (queue, limiter, cache, breaker). A module keeps its
 * scripts in a `commands/` directory, BullMQ style: `<op>-<numKeys>.lua`, where numKeys is a
 * number, or `n` for a variable number of keys (e.g. one per limiter window). A module whose
 * scripts all take the same key layout (the queue: the keys of one shard) names them `<op>.lua`
 * and gives the layout's key count once (`{ layoutKeys }`): a suffix every file repeats says
 * nothing, and the layout is documented once, in the include that names the keys. Shared code lives in
 * `commands/includes/` and `--- @include "includes/x"` lines are inlined, each at most once.
 * Code every module needs (`nowMs`) lives here, in `redis/includes/`: `--- @include "shared/x"`.
 * Scripts run by EVALSHA; ioredis loads them when Redis does not know them (first use, restart).
 */
export interface LuaCommand {
  /** The ioredis command name: `<commandPrefix><Op>`. */
  command: string;
  /** Undefined for `n`: variable. */
  numberOfKeys: number | undefined;
  lua: string;
}

const INCLUDE = /^--- @include "([\w/-]+)"\s*$/gm;
const FILE_NAME = /^(\w+)-(\d+|n)\.lua$/;
const LAYOUT_FILE_NAME = /^(\w+)\.lua$/;

const SHARED_PREFIX = 'shared/';
const SHARED_INCLUDES = join(import.meta.dirname, 'includes');

/** The file of an include: `shared/x` from redis/includes/, anything else from the module's `dir`. */
function includeFile(dir: string, name: string): string {
  return name.startsWith(SHARED_PREFIX)
    ? join(SHARED_INCLUDES, `${name.slice(SHARED_PREFIX.length)}.lua`)
    : join(dir, `${name}.lua`);
}

function expand(dir: string, source: string, seen: Set<string>): string {
  return source.replace(INCLUDE, (_line, name: string) => {
    if (seen.has(name)) return '';
    seen.add(name);
    return expand(dir, readFileSync(includeFile(dir, name), 'utf8'), seen);
  });
}

/** How the commands of a directory take their keys. */
export interface LuaLayout {
  /**
   * Every command takes the same `layoutKeys` keys (one documented layout): files are named
   * `<op>.lua`. Without it, each file names its own count: `<op>-<numKeys|n>.lua`.
   */
  layoutKeys?: number;
}

/** The op and key count a file name gives (undefined count: variable). */
function parseFileName(file: string, layout: LuaLayout): { op: string; numberOfKeys: number | undefined } {
  if (layout.layoutKeys !== undefined) {
    const op = LAYOUT_FILE_NAME.exec(file)?.[1];
    if (!op) throw new Error(`Lua command ${file} is not named <op>.lua`);
    return { op, numberOfKeys: layout.layoutKeys };
  }
  const match = FILE_NAME.exec(file);
  if (!match?.[1] || !match[2]) throw new Error(`Lua command ${file} is not named <op>-<numKeys|n>.lua`);
  return { op: match[1], numberOfKeys: match[2] === 'n' ? undefined : Number(match[2]) };
}

/** Reads and expands every command of `dir` once, keyed by op. */
export function readLuaCommands(
  dir: string,
  commandPrefix: string,
  layout: LuaLayout = {},
): ReadonlyMap<string, LuaCommand> {
  const commands = new Map<string, LuaCommand>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) {
    const { op, numberOfKeys } = parseFileName(file, layout);
    commands.set(op, {
      command: `${commandPrefix}${op[0]?.toUpperCase()}${op.slice(1)}`,
      numberOfKeys,
      lua: expand(dir, readFileSync(join(dir, file), 'utf8'), new Set()),
    });
  }
  return commands;
}

/** A client, or one of its pipelines (ioredis's ChainableCommander, not a dependency here). */
type Target = RedisClient | ReturnType<RedisClient['pipeline']>;
type CommandFn = (...keysAndArgs: Array<string | number>) => unknown;

/** Calls `op` on a client or a pipeline of it (EVALSHA; ioredis loads the script when missing). */
export type LuaCaller = (target: Target, op: string, keys: string[], args: Array<string | number>) => unknown;

/** The ioredis command of a variable-key script for `count` keys, e.g. `rateLimiterBucket3`. */
const arityName = (command: string, count: number) => `${command}${count}`;

/**
 * Defines the commands on a client (once per client; pipelines of it inherit them). A variable-key
 * command is defined once per key count up to `maxKeys` (one script, one SHA): ioredis must see
 * the keys where it expects them, or cluster auto-pipelining routes by the key count instead.
 */
export function defineLuaCommands(
  redis: RedisClient,
  commands: ReadonlyMap<string, LuaCommand>,
  maxKeys: number,
): LuaCaller {
  const client = redis as unknown as Record<string, unknown>;
  const define = (name: string, numberOfKeys: number, lua: string) => {
    if (typeof client[name] !== 'function') redis.defineCommand(name, { numberOfKeys, lua });
  };
  for (const { command, numberOfKeys, lua } of commands.values()) {
    if (numberOfKeys !== undefined) define(command, numberOfKeys, lua);
    else for (let count = 1; count <= maxKeys; count++) define(arityName(command, count), count, lua);
  }
  return (target, op, keys, args) => {
    const command = commands.get(op);
    if (!command) throw new Error(`unknown Lua command ${op}`);
    const name =
      command.numberOfKeys === undefined ? arityName(command.command, keys.length) : command.command;
    const fn = (target as unknown as Record<string, CommandFn | undefined>)[name];
    if (!fn) throw new Error(`Lua command ${op} is not defined for ${keys.length} keys`);
    return fn.call(target, ...keys, ...args);
  };
}

/** Runs one script of a module: on the client, or queued on one of its pipelines (`target`). */
export type LuaRun<Op extends string> = (
  op: Op,
  keys: readonly string[],
  args: ReadonlyArray<string | number>,
  target?: Target,
) => Promise<unknown>;

/**
 * What every module's `scripts.ts` starts from: its commands defined on `redis`, and a runner by op.
 * The module's `load<Module>Scripts(redis)` wraps it in one typed function per script (KEYS/ARGV
 * built from arguments, the reply decoded), and nothing else in the module calls scripts.
 */
export function luaScripts<Op extends string>(
  redis: RedisClient,
  commands: ReadonlyMap<string, LuaCommand>,
  maxKeys: number,
): LuaRun<Op> {
  const call = defineLuaCommands(redis, commands, maxKeys);
  return (op, keys, args, target = redis) => call(target, op, [...keys], [...args]) as Promise<unknown>;
}
