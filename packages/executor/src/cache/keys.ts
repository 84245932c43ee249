import { createHash } from 'node:crypto';

/** The Redis names of one cache key. */
export interface CacheKeys {
  /** STRING: the stored response (JSON entry), expiring with the request's TTL. */
  value: string;
  /** STRING: token of the caller filling the entry, expiring after the lock TTL. */
  lock: string;
  /** Pub/sub channel on which a fill announces `stored` or `released`. */
  channel: string;
}

/**
 * `<prefix>cache:{c:<sha256(key) base64url>}:v|lock|ch`. The caller's key is hashed, so whatever
 * it contains (`{`, `}`, `:`, another tenant's naming) it can neither name a key outside the cache
 * nor split the hash tag; value, lock and channel share one tag, hence one Redis Cluster slot.
 */
export function cacheKeys(prefix: string, key: string): CacheKeys {
  const base = `${prefix}cache:{c:${createHash('sha256').update(key).digest('base64url')}}`;
  return { value: `${base}:v`, lock: `${base}:lock`, channel: `${base}:ch` };
}
