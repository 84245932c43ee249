import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { KeyRecord } from './types.ts';

/**
 * API keys of the HTTP API, kept in PostgreSQL (`requester_api_keys`, migration 002). A key is
 * shown once as `rqk_<id>_<secret>`: the id is public (it finds the row), the secret is 256
 * random bits of which only the SHA-256 is stored. A stolen table does not give a usable key, and
 * a fast hash is enough for a secret nobody can guess.
 */
export const TOKEN_PREFIX = 'rqk_';
const ID_BYTES = 6;
const SECRET_BYTES = 32;
const TOKEN_PATTERN = /^rqk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/;

/** The id and secret of a presented token; undefined when it is not shaped like one of ours. */
export function parseToken(token: string): { id: string; secret: string } | undefined {
  const match = TOKEN_PATTERN.exec(token);
  return match ? { id: match[1] as string, secret: match[2] as string } : undefined;
}

/** SHA-256 of a 256-bit random secret (an API key's, or an operator UI session id). */
export function hashSecret(secret: string): Buffer {
  return hash('sha256', secret, 'buffer');
}

/**
 * Whether `secret` opens `record` at `now`: its current secret, or the one replaced by a rotation
 * within its grace period. Both hashes are compared in constant time, always, so the answer's
 * timing tells nothing about which one matched or how much of it.
 */
export function secretMatches(record: KeyRecord, secret: string, now = Date.now()): boolean {
  return secretHashAccepted(record, hashSecret(secret), now);
}

/**
 * secretMatches for a secret known by its hash (hashSecret): what an operator UI session keeps of
 * the secret it was opened with, so that it ends when that secret is rotated away.
 */
export function secretHashAccepted(record: KeyRecord, presented: Buffer, now = Date.now()): boolean {
  const current = timingSafeEqual(presented, record.secretHash);
  const previous = record.previousHash ?? Buffer.alloc(presented.length);
  const graceOpen = (record.previousExpiresAt?.getTime() ?? 0) > now;
  const old = timingSafeEqual(presented, previous) && graceOpen && record.previousHash !== undefined;
  return current || old;
}

/**
 * A fresh token, stored nowhere: what an operator puts in BOOTSTRAP_ADMIN_KEY
 * (`requester keys token`), adopted by KeyStore.adopt.
 */
export function mintToken(): string {
  return newToken(newKeyId()).token;
}

/** A new key's id: public, it finds the key's row. */
export function newKeyId(): string {
  return randomBytes(ID_BYTES).toString('hex');
}

export function newToken(id: string): { token: string; secret: string } {
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  return { token: `${TOKEN_PREFIX}${id}_${secret}`, secret };
}
