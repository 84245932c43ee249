/**
 * Access control of the HTTP API: `access.ts` (what an Access answers), `middleware.ts` (the
 * caller of a request), `open.ts` (AUTH=off), `key-access.ts` (AUTH=on: API keys), `scopes.ts`
 * (what a key may ask for), `refusals.ts`, `from-config.ts`.
 *
 * @module
 */

export type { Access, Admission, Caller, Refusal } from './access.ts';
export { accessFromConfig, apiKeyLimiterPrefix } from './from-config.ts';
export { KeyAccess, type KeyAccessOptions } from './key-access.ts';
export { authenticate, callerBindings } from './middleware.ts';
export { openAccess } from './open.ts';
export { hostMatches, hostPortMatches } from './scopes.ts';
