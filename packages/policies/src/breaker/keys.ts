import { createHash } from 'node:crypto';

/**
 * Redis keys of the breaker. The two keys of one origin carry the hash tag `{b:<hash>}`, so each
 * script runs in one Redis Cluster slot. The tag is a hash of the origin, not the origin itself:
 * origins are user input (a `}` would break the tag) and a 128-bit hash keeps keys short without
 * letting two origins share a state (a collision would let one target trip another's breaker).
 */
export function originKeys(prefix: string, origin: string): [state: string, trials: string] {
  const tag = originTag(origin);
  return [`${prefix}${tag}:state`, `${prefix}${tag}:trials`];
}

/**
 * The five keys the scripts take: the origin's two, a caller's two (its own breaker at that
 * origin, `callerId` the caller's hash) and the set of the origin's callers that have a state, all
 * under the origin's tag (one slot). Without a caller, its keys are named but never touched.
 */
export function scopeKeys(prefix: string, origin: string, callerId: string): string[] {
  const tag = originTag(origin);
  const mine = `${prefix}${tag}:c:${callerId || '-'}`;
  return [
    `${prefix}${tag}:state`,
    `${prefix}${tag}:trials`,
    `${mine}:state`,
    `${mine}:trials`,
    `${prefix}${tag}:callers`,
  ];
}

/** The keys of every caller of `origin` listed in its callers set (a reset deletes them). */
export function callerKeysOf(prefix: string, origin: string, callerIds: readonly string[]): string[] {
  const tag = originTag(origin);
  return callerIds.flatMap((id) => [`${prefix}${tag}:c:${id}:state`, `${prefix}${tag}:c:${id}:trials`]);
}

/** The set of `origin`'s callers that have a state of their own. */
export function callersKey(prefix: string, origin: string): string {
  return `${prefix}${originTag(origin)}:callers`;
}

/**
 * A caller's name in its keys: a hash, as callers (clients) are user input. 64 bits: a collision
 * would merge two callers' breakers at one origin, no worse than today's one breaker per origin.
 */
export function callerIdOf(caller: string): string {
  return createHash('sha256').update(caller, 'utf8').digest('hex').slice(0, 16);
}

function originTag(origin: string): string {
  return `{b:${createHash('sha256').update(origin, 'utf8').digest('hex').slice(0, 32)}}`;
}

/**
 * ZSET origin -> open-until (ms) of the origins not closed: the listing for backpressure. It lives
 * in its own slot, so it is kept by the client after a script reports a transition (best effort,
 * repaired when listed), not inside the scripts.
 */
export function openIndexKey(prefix: string): string {
  return `${prefix}open`;
}

/**
 * ZSET `origin\nclient` -> open-until (ms) of the callers whose own breaker at an origin is not
 * closed: the operator's listing (`requester breakers list`), apart from the origins' index, which
 * the router's backpressure reads (one client's failures pause nobody). Kept like the open index.
 */
export function openCallersIndexKey(prefix: string): string {
  return `${prefix}open-callers`;
}

/**
 * ZSET origin -> held since (ms) of the origins held back (failing-held, or at the receiver's
 * request): `heldOrigins()` and the `origin_failing*` gauges. Kept like the open index.
 */
export function heldIndexKey(prefix: string): string {
  return `${prefix}held`;
}
