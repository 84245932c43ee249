/**
 * @requester/ingress: the `ingress` and `sync-gateway` roles (docs/architecture.md §3), loaded by the
 * requester CLI. Both serve one HTTP API per process (see `server/`).
 */
export { type Access, apiKeyLimiterPrefix, type Caller, KeyAccess, type Refusal } from './auth/index.ts';
export {
  ADMIN_SCOPES,
  type AdminScope,
  type CreateKey,
  hashSecret,
  type IssuedKey,
  type KeyInfo,
  type KeyScopes,
  KeyStore,
  mintToken,
  parseToken,
  secretHashAccepted,
} from './keys/index.ts';
export { type HttpRoleHandle, ingressRole, type SyncGatewayHandle, syncGatewayRole } from './roles/index.ts';
export { answerClientErrors } from './server/client-errors.ts';
