import type { CredentialSecretsInput } from '@requester/shared';
import { UsageError, ValidationError } from '@requester/shared';
import { type AdminContext, answer, bodyOf as readBody } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import {
  createCredential,
  listCredentials,
  revokeCredential,
  rotateCredential,
  secretsFromForm,
  setCredentialOrigins,
} from './index.ts';

/**
 * The admin API of credentials (`/admin/api/credentials…` on the admin port; the routes'
 * authentication is the app's: a POST needs a write key). Bodies are JSON:
 * `{name, secrets: {oauth2?, mtls?, proxy?, signing?}, origins}` to create (origins: the
 * `scheme://host[:port]` it may be sent to, a list or comma-separated), `{name, secrets}` to rotate,
 * `{name, origins}` to set its origins, `{name}` to revoke;
 * or the operator UI's form (`name`, `kind` and flat fields: secretsFromForm). Answers and
 * recorded actions carry the name and summary, never a secret; the UI gets a flash naming the
 * credential and its version.
 */
export const api: ApiFace = {
  paths: {
    '/admin/api/credentials': {
      get: {
        summary:
          'Target credentials: name, version, master key id and a summary, never a secret (requester credentials list)',
        params: ['all'],
      },
      post: undefined,
    },
    '/admin/api/credentials/create': {
      get: undefined,
      post: {
        summary:
          'Create a target credential bound to its origins (requester credentials create); needs a write key',
        write: true,
        body: {
          name: { type: 'string' },
          secrets: { type: 'object' },
          origins: { type: 'array', items: { type: 'string' } },
        },
      },
    },
    '/admin/api/credentials/set-origins': {
      get: undefined,
      post: {
        summary:
          'Name the origins a credential may be sent to, replacing its list (requester credentials set-origins); needs a write key',
        write: true,
        body: { name: { type: 'string' }, origins: { type: 'array', items: { type: 'string' } } },
      },
    },
    '/admin/api/credentials/rotate': {
      get: undefined,
      post: {
        summary:
          'New secrets for a credential, a new version (requester credentials rotate); needs a write key',
        write: true,
        body: { name: { type: 'string' }, secrets: { type: 'object' } },
      },
    },
    '/admin/api/credentials/revoke': {
      get: undefined,
      post: {
        summary:
          'Revoke a credential: its requests fail with credential_revoked (requester credentials revoke); needs a write key',
        write: true,
        body: { name: { type: 'string' } },
      },
    },
  },
  routes(app, console) {
    app.get('/admin/api/credentials', async (c) =>
      c.json(await listCredentials(await console.credentialStore(), c.req.query('all') === 'true')),
    );
    app.post('/admin/api/credentials/create', async (c) => {
      const { name, secrets, origins } = await bodyOf(c, true);
      const view = await refusing(async () =>
        createCredential(await console.credentialStore(), name, secrets, origins),
      );
      await console.record(c.get('operator'), 'credentials.create', {
        credential: name,
        version: view.version,
        origins: view.origins,
      });
      return answer(c, view, `Created ${name} (${view.kind}), version ${view.version}.`);
    });
    app.post('/admin/api/credentials/rotate', async (c) => {
      const { name, secrets } = await bodyOf(c, true);
      const view = await refusing(async () =>
        rotateCredential(await console.credentialStore(), name, secrets),
      );
      await console.record(c.get('operator'), 'credentials.rotate', {
        credential: name,
        version: view.version,
      });
      return answer(
        c,
        view,
        `Rotated ${name} to version ${view.version}; executors switch within CREDENTIALS_CACHE_TTL.`,
      );
    });
    app.post('/admin/api/credentials/set-origins', async (c) => {
      const { name, origins } = await bodyOf(c, false);
      const view = await refusing(async () =>
        setCredentialOrigins(await console.credentialStore(), name, origins),
      );
      await console.record(c.get('operator'), 'credentials.set-origins', {
        credential: name,
        origins: view.origins,
      });
      return answer(c, view, `${name} may be sent to ${view.origins.join(', ')}.`);
    });
    app.post('/admin/api/credentials/revoke', async (c) => {
      const { name } = await bodyOf(c, false);
      const result = await refusing(async () => revokeCredential(await console.credentialStore(), name));
      await console.record(c.get('operator'), 'credentials.revoke', { credential: name });
      return answer(c, result, `Revoked ${name}: its requests fail with credential_revoked.`);
    });
  },
};

async function bodyOf(
  c: AdminContext,
  withSecrets: boolean,
): Promise<{ name: string; secrets: CredentialSecretsInput; origins: string[] | string }> {
  const json = (c.req.header('content-type') ?? '').startsWith('application/json');
  const body = json
    ? ((await c.req.json().catch(() => undefined)) as Record<string, unknown> | undefined)
    : await readBody(c);
  const name = typeof body?.name === 'string' ? body.name.trim() : '';
  if (name === '') throw new UsageError('name is required');
  // A list, or comma-separated text (the UI's form); the store refuses an empty one when it needs one.
  const listed = body?.origins;
  const origins = Array.isArray(listed)
    ? listed.filter((o): o is string => typeof o === 'string')
    : typeof listed === 'string'
      ? listed
      : [];
  if (!withSecrets) return { name, secrets: {}, origins };
  // The UI's form: flat fields by kind. JSON: the credential's document under `secrets`.
  if (!json) return { name, secrets: secretsFromForm(body as Record<string, unknown>), origins };
  if (typeof body?.secrets !== 'object' || body.secrets === null)
    throw new UsageError('secrets is required: {oauth2?, mtls?, proxy?, signing?}');
  return { name, secrets: body.secrets as CredentialSecretsInput, origins };
}

/** A refused input is the caller's (400), with the fields named and no value echoed. */
async function refusing<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof ValidationError) throw new UsageError(err.message);
    throw err;
  }
}
