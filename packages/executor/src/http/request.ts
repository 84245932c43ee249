import { hash } from 'node:crypto';
import { clientScoped, type RequestEnvelope } from '@requester/shared/contract';
import { durationToMs } from '@requester/shared/time';
import type { HttpCall } from './index.ts';

/**
 * The outgoing call of a request envelope. Adds an `Idempotency-Key` derived from the client's
 * requestId (docs/architecture.md §5, outbound hygiene): the same on every attempt and every
 * executor, so a target that honours it can drop the duplicates at-least-once delivery may cause.
 * A caller's own key wins.
 */
export function toHttpCall(envelope: RequestEnvelope): HttpCall {
  const headers = { ...(envelope.request.headers ?? {}) };
  if (!hasHeader(headers, 'idempotency-key')) {
    headers['idempotency-key'] = idempotencyKey(envelope.meta.requestId, envelope.meta.client);
  }
  const call: HttpCall = { method: envelope.request.method, uri: envelope.request.uri, headers };
  if (envelope.request.body !== undefined) call.body = envelope.request.body;
  if (envelope.meta.credentials !== undefined) call.credentials = envelope.meta.credentials;
  if (envelope.meta.credentials !== undefined || envelope.meta.signing) call.keepOrigin = true;
  if (envelope.meta.timeout !== undefined) call.timeoutMs = durationToMs(envelope.meta.timeout);
  return call;
}

/** Whether `headers` has `name` (lower case), in any case. */
function hasHeader(headers: Record<string, string>, name: string): boolean {
  for (const key in headers) if (key.toLowerCase() === name) return true;
  return false;
}

// A fixed namespace so every Requester deployment derives the same key from the same requestId.
const NAMESPACE = Buffer.from('6f1d3c0e9a4b4d2f8e7a5b3c1d0e9f8a', 'hex');

/**
 * A name-based UUID (RFC 9562 version 5) of the requestId in its client's namespace: opaque,
 * stable, in the usual key format. Two clients' requests of one requestId get two keys, so a
 * target that remembers keys never answers one client's call with the other's; without a client
 * the key is the one earlier versions derived.
 */
export function idempotencyKey(requestId: string, client?: string): string {
  const name = clientScoped(client, requestId);
  // One-shot: no Hash object per call (a third less CPU than createHash for these few bytes).
  const digest = hash('sha1', Buffer.concat([NAMESPACE, Buffer.from(name, 'utf8')]), 'buffer');
  digest[6] = ((digest[6] ?? 0) & 0x0f) | 0x50;
  digest[8] = ((digest[8] ?? 0) & 0x3f) | 0x80;
  const hex = digest.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
