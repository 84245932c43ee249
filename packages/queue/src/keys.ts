import { crc32 } from 'node:zlib';
import { RequesterError } from '@requester/shared/errors';

/**
 * The keys of one shard, in the order every queue script receives them as KEYS (the one
 * layout of `commands/<op>.lua`).
 * Every key carries the hash tag `{q:S}`, so a whole shard lives in one Redis Cluster slot and a
 * script touching it is a single-slot operation. What each key holds is documented in
 * `commands/includes/shard.lua`.
 */
export const SHARD_KEY_NAMES = [
  'ready',
  'timers',
  'pending',
  'tasks',
  'leases',
  'running',
  'seq',
  'done',
  'dlq',
  'ages',
  'agecount',
  'clients',
  'cready',
  'shares',
  'cdepth',
  'caps',
  'tprio',
  'pready',
  'pband',
  'passed',
] as const;

export type ShardKeyName = (typeof SHARD_KEY_NAMES)[number];

/** Partitions whose name starts with this are ordered: one task in flight, strict arrival order. */
export const ORDERED_PREFIX = '!';

export function shardKey(prefix: string, shard: number, name: ShardKeyName): string {
  return `${prefix}{q:${shard}}:${name}`;
}

export function shardKeys(prefix: string, shard: number): string[] {
  return SHARD_KEY_NAMES.map((name) => shardKey(prefix, shard, name));
}

/**
 * The keys of one client's cap of tasks in flight (`cap/commands/acquire-2.lua`): its cap and the
 * slots taken, tagged `{c:<client>}` so that both live in one Redis Cluster slot of their own,
 * whichever shards the client's partitions are in.
 */
export function clientCapKeys(prefix: string, client: string): { cap: string; held: string } {
  return { cap: `${prefix}{c:${client}}:cap`, held: `${prefix}{c:${client}}:held` };
}

/** Stable partition → shard mapping (CRC-32, the same in every process and language). */
export function shardOfPartition(partition: string, shards: number): number {
  return crc32(partition) % shards;
}

/**
 * Between a partition's name and its client (the client namespace of `@requester/shared/contract`,
 * `clientScoped`): the fair share between clients reads a partition's client from its name, in
 * Lua (`clientOf` in commands/includes/shard.lua, which hardcodes it; a test checks they agree).
 */
export const CLIENT_SEPARATOR = ' @';

/** The client a partition belongs to: what follows the last ` @` of its name; '' (anonymous) for none. */
export function clientOfPartition(partition: string): string {
  const at = partition.lastIndexOf(CLIENT_SEPARATOR);
  return at < 0 ? '' : partition.slice(at + CLIENT_SEPARATOR.length);
}

export function isOrderedPartition(partition: string): boolean {
  return partition.startsWith(ORDERED_PREFIX);
}

/**
 * A lease token is `<shard>:<arrival seq hex>-<delivery count>-<limited 1|0>:<task id>`: the shard
 * routes extend and settlement calls without a lookup; sequence number and delivery count make
 * every lease of a task distinct, so that a token that outlived its lease (reclaimed, re-leased)
 * is refused.
 */
export function parseToken(token: string): { shard: number; id: string } {
  const first = token.indexOf(':');
  const second = first < 0 ? -1 : token.indexOf(':', first + 1);
  const shard = Number(token.slice(0, first));
  if (second < 0 || !Number.isInteger(shard) || shard < 0) {
    throw new RequesterError('invalid_request', `not a queue lease token: ${JSON.stringify(token)}`);
  }
  return { shard, id: token.slice(second + 1) };
}
