import { createHash } from 'node:crypto';
import type { RequestEnvelope } from '@requester/shared/contract';

/**
 * The credential identity a call's pace is kept for (docs/architecture.md §9, "whose trouble"): the
 * named credential (`c:<name>`), else a hash of the caller's own `Authorization` (`a:<hash>`;
 * the secret itself never reaches a Redis key, a log or a metric), else none: the origin's pace.
 * Targets count quotas per credential, so one credential's 429 holds its own calls.
 */
export function paceIdentity(envelope: RequestEnvelope): string | undefined {
  const named = envelope.meta.credentials;
  if (named) return credentialPaceIdentity(named);
  const headers = envelope.request.headers;
  if (!headers) return undefined;
  for (const name in headers)
    if (name.length === 13 && name.toLowerCase() === 'authorization') {
      const value = headers[name];
      if (value) return `a:${createHash('sha256').update(value, 'utf8').digest('base64url').slice(0, 22)}`;
    }
  return undefined;
}

/** The pace identity of the calls carrying the named credential. */
export function credentialPaceIdentity(name: string): string {
  return `c:${name}`;
}
