import { createHash } from 'node:crypto';

/** The Redis names of one cache key. */
export interface CacheKeys {
  /** STRING: the stored response (its request's identity line, then the JSON entry), expiring with the request's TTL. */
  value: string;
  /** STRING: the identity line and token of the caller filling the entry, expiring after the lock TTL. */
  lock: string;
  /** Pub/sub channel on which a fill announces `stored` or `released`. */
  channel: string;
}

/**
 * `<prefix>cache:{c:<sha256(key) base64url>}:v|lock|ch`. The key is the caller's `meta.cache.key`
 * in its client's namespace (`clientScoped`: another client's same key is another entry). It is
 * hashed, so whatever it contains (`{`, `}`, `:`, another tenant's naming) it can neither name a
 * key outside the cache nor split the hash tag; value, lock and channel share one tag, hence one
 * Redis Cluster slot.
 */
export function cacheKeys(prefix: string, key: string): CacheKeys {
  const base = `${prefix}cache:{c:${createHash('sha256').update(key).digest('base64url')}}`;
  return { value: `${base}:v`, lock: `${base}:lock`, channel: `${base}:ch` };
}

/** What of a request decides the answer it gets: what the caller asked to send. */
export interface AnsweredRequest {
  method?: string | undefined;
  uri: string;
  headers?: Readonly<Record<string, string>> | undefined;
  body?: string | undefined;
  /** `meta.credentials`: the answer of a call made with one credential is not another's. */
  credentials?: string | undefined;
}

/**
 * The identity of a request, which a cache entry records: a digest of its method, full URL, body
 * and every header the caller set (names in any case, in any order). A stored answer serves only
 * the request it answered: any of these may select the answer (a query token, a credential or
 * owner header, `Accept`, a body), so a key alone cannot tell that two requests deserve one
 * answer. Headers the service adds per attempt (`traceparent`, `Idempotency-Key`, signatures) are
 * not the caller's and do not count.
 */
export function requestIdentity(request: AnsweredRequest): string {
  const headers = Object.entries(request.headers ?? {})
    .map(([name, value]) => [name.toLowerCase(), value] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const method = (request.method ?? 'GET').toUpperCase();
  const parts: unknown[] = [method, request.uri, headers, request.body ?? null];
  // Only when present, so that the identities of requests without a credential stay as they were.
  if (request.credentials !== undefined) parts.push(request.credentials);
  const canonical = JSON.stringify(parts);
  return createHash('sha256').update(canonical).digest('base64url');
}
