import { createHash } from 'node:crypto';

/**
 * Redis keys of the breaker. The two keys of one origin carry the hash tag `{b:<hash>}`, so each
 * script runs in one Redis Cluster slot. The tag is a hash of the origin, not the origin itself:
 * origins are user input (a `}` would break the tag) and a 128-bit hash keeps keys short without
 * letting two origins share a state (a collision would let one target trip another's breaker).
 */
export function originKeys(prefix: string, origin: string): [state: string, trials: string] {
  const tag = `{b:${createHash('sha256').update(origin, 'utf8').digest('hex').slice(0, 32)}}`;
  return [`${prefix}${tag}:state`, `${prefix}${tag}:trials`];
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
 * ZSET origin -> held since (ms) of the origins held back (failing-held, or at the receiver's
 * request): `heldOrigins()` and the `origin_failing*` gauges. Kept like the open index.
 */
export function heldIndexKey(prefix: string): string {
  return `${prefix}held`;
}
