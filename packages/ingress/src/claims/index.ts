import { hash } from 'node:crypto';
import { clientScoped, type RequestEnvelope } from '@requester/shared/contract';
import type { RedisClient } from '@requester/shared/redis';

/**
 * Which request a requestId names, shared by every ingress instance through Redis, so that a
 * second, *different* request reusing an id is refused (HTTP 409) instead of being absorbed by the
 * router's dedup, which keeps the first and drops the second without a word.
 *
 * A requestId is its client's (the client namespace, docs/architecture.md §10): another client
 * using the same id claims another key, so it is no conflict and learns nothing of the first.
 * One key per client's requestId, `<prefix>rid:<clientScoped(client, requestId)>` = the
 * fingerprint of the request, for the dedup window (QUEUE_DEDUP_WINDOW, the router's own): one
 * `SET NX GET PX` claims the id or reads the fingerprint already there, in one round trip (needs
 * Redis 7.0+). Concurrent claims share the connection's pipeline (ioredis auto-pipelining).
 */
export type Claim =
  /** First time in the window: the caller goes on. */
  | 'new'
  /** The same request again (a retry): idempotent, the caller goes on as for a new one. */
  | 'same'
  /** A different request already holds this id within the window. */
  | 'conflict';

export type ClaimRequestId = (
  client: string | undefined,
  requestId: string,
  fingerprint: string,
) => Promise<Claim>;

/** Claims in Redis; `windowMs` 0 disables the check (every claim is new). */
export function redisRequestIds(redis: RedisClient, prefix: string, windowMs: number): ClaimRequestId {
  return async (client, requestId, fingerprint) => {
    if (windowMs <= 0) return 'new';
    const key = `${prefix}rid:${clientScoped(client, requestId)}`;
    const held = await redis.call('SET', key, fingerprint, 'NX', 'GET', 'PX', String(windowMs));
    if (held === null) return 'new';
    return held === fingerprint ? 'same' : 'conflict';
  };
}

/**
 * Whether this client's requestId was claimed within the dedup window (`redisRequestIds`' key):
 * a request this service accepted over HTTP lately. Another client's request of the same id is
 * another key, so it is not seen. Undefined when claims are off (`windowMs` 0): nothing to tell.
 */
export function claimedRequestIds(
  redis: RedisClient,
  prefix: string,
  windowMs: number,
): ((client: string | undefined, requestId: string) => Promise<boolean>) | undefined {
  if (windowMs <= 0) return undefined;
  return async (client, requestId) =>
    (await redis.exists(`${prefix}rid:${clientScoped(client, requestId)}`)) === 1;
}

/**
 * A digest of what makes a request that request: the validated envelope (defaults applied), keys
 * sorted at every level, without what the service sets or resets (`createdAt`, `tryCount`,
 * `waitTime`, `retryBase`, `withinHorizon`) and without how the caller follows it (`meta.sync`, a
 * retry may wait differently; `meta.traceparent`, a retry may start a new trace).
 */
export function requestFingerprint(envelope: RequestEnvelope): string {
  const { createdAt: _c, tryCount: _t, waitTime: _w, retryBase: _r, withinHorizon: _h, ...rest } = envelope;
  const { sync: _s, traceparent: _p, ...meta } = rest.meta;
  // One-shot: a Hash object per request cost more than the digest itself.
  return hash('sha256', canonicalJson({ ...rest, meta }), 'base64url');
}

/** JSON with object keys sorted, so that equal values always serialize alike. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(v).sort()) sorted[key] = (v as Record<string, unknown>)[key];
    return sorted;
  });
}
