/**
 * API keys of the HTTP API, kept in PostgreSQL (`requester_api_keys`, migration 002). A key is
 * shown once as `rqk_<id>_<secret>`: the id is public (it finds the row), the secret is 256
 * random bits of which only the SHA-256 is stored. A stolen table does not give a usable key, and
 * a fast hash is enough for a secret nobody can guess.
 */

export { checkHostPattern, checkKeyName, parseRate, splitHostPattern } from './checks.ts';
export { infoOf, KeyStore } from './store.ts';
export {
  hashSecret,
  mintToken,
  parseToken,
  secretHashAccepted,
  secretMatches,
  TOKEN_PREFIX,
} from './token.ts';
export {
  ADMIN_SCOPES,
  type AdminScope,
  type CreateKey,
  type IssuedKey,
  type KeyInfo,
  type KeyRate,
  type KeyRecord,
  type KeyScopes,
  MAX_KEY_IN_FLIGHT,
  MAX_KEY_WEIGHT,
} from './types.ts';
