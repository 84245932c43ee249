/** Target credentials and request signing. */

import { z } from 'zod';
import { goDuration, secretText } from '../values.ts';
import { variable } from '../variable.ts';

export const credentialsVariables = {
  signingKeys: variable(
    'SIGNING_KEYS',
    '',
    secretText,
    'deprecated (signing keys now live in the credential store: `requester credentials create <id> --signing-secret-file`, or `requester credentials import-signing` to move these): request signing keys `id=whsec_<base64>` (Standard Webhooks) or `id=hex:…`/`base64:…`/`text:…` (X-Signature HMAC), `;`-separated; an id listed twice signs with both (rotation). Used for key ids the store does not know; the executor warns at start. Never printed',
  ),
  credentialsMasterKey: variable(
    'CREDENTIALS_MASTER_KEY',
    undefined,
    secretText.optional(),
    'master keys of the credential store (`requester credentials`): `<id>:<base64 of 32 bytes>`, comma-separated; the first wraps new data keys, the others only unwrap (rotation: put the new key first, run `requester credentials rewrap`, then drop the old one). Unset = no credentials. Never printed',
  ),
  credentialsMasterKeyFile: variable(
    'CREDENTIALS_MASTER_KEY_FILE',
    undefined,
    z.string().optional(),
    'a file holding what CREDENTIALS_MASTER_KEY would (e.g. a mounted secret); set one of the two',
  ),
  credentialsCacheTtl: variable(
    'CREDENTIALS_CACHE_TTL',
    '5s',
    goDuration,
    'how long an executor or ingress trusts a credential it read from PostgreSQL: a revoked or rotated credential is dropped everywhere within this',
  ),
  oauth2TokenTimeout: variable(
    'OAUTH2_TOKEN_TIMEOUT',
    '10s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'bound on fetching an OAuth2 access token (credentials with `oauth2`), the wait for another executor fetching it included; past it the attempt fails with `credential_unavailable`',
  ),
};
