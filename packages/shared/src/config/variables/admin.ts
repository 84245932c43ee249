/** The admin port, the operator UI and the operator actions. */

import { z } from 'zod';
import { bool, goDuration, port, secretText } from '../values.ts';
import { variable } from '../variable.ts';

export const adminVariables = {
  bootstrapAdminKey: variable(
    'BOOTSTRAP_ADMIN_KEY',
    undefined,
    secretText.optional(),
    '`requester migrate` creates the first admin key (admin write, named `admin`) from this token when no key named `admin` ever existed (a revoked one stays revoked): make the token with `requester keys token` or openssl (README, Deploy), keep it in a Secret. Never printed',
  ),
  cliActor: variable(
    'CLI_ACTOR',
    undefined,
    z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9@._-]{0,99}$/, 'letters, digits, @ . _ -, at most 100')
      .optional(),
    'who runs admin commands, as operator actions record it (`cli:<CLI_ACTOR>`); unset = `cli:<os user>@<host name>` (in a container: the pod or container name). Set it when you exec into a pod, e.g. `kubectl exec … -- env CLI_ACTOR=alice requester queue purge`',
  ),
  adminPort: variable(
    'ADMIN_PORT',
    '9464',
    port,
    'port of /healthz, /readyz and /metrics, the operator UI (/ui) and the admin API (/admin/api); internal: /metrics names every API key, and nothing there is for callers',
  ),
  adminSessionTtl: variable(
    'ADMIN_SESSION_TTL',
    '8h',
    goDuration.refine((ms) => ms >= 60_000, 'must be at least 1m'),
    'how long an operator UI login lasts (its session ends sooner at logout, or when its API key is revoked or rotated away)',
  ),
  adminTrustProxy: variable(
    'ADMIN_TRUST_PROXY',
    'false',
    bool,
    'the admin port is reached through a TLS-terminating proxy that sets X-Forwarded-Proto: a login it marks https gets a Secure session cookie (the admin port itself speaks plain HTTP)',
  ),
};
