import type { CredentialSecretsInput } from '@requester/shared';
import { UsageError, ValidationError } from '@requester/shared';
import type { AdminContext } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { createCredential, listCredentials, revokeCredential, rotateCredential } from './index.ts';

/**
 * The admin API of credentials (`/admin/api/credentials…` on the admin port; the routes'
 * authentication is the app's: a POST needs a write key). Bodies are JSON:
 * `{name, secrets: {oauth2?, mtls?, proxy?}}` to create or rotate, `{name}` to revoke. Answers
 * and recorded actions carry the name and summary, never a secret.
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
        summary: 'Create a target credential (requester credentials create); needs a write key',
        write: true,
        body: { name: { type: 'string' }, secrets: { type: 'object' } },
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
      const { name, secrets } = await bodyOf(c, true);
      const view = await refusing(async () =>
        createCredential(await console.credentialStore(), name, secrets),
      );
      await console.record(c.get('operator'), 'credentials.create', {
        credential: name,
        version: view.version,
      });
      return c.json(view);
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
      return c.json(view);
    });
    app.post('/admin/api/credentials/revoke', async (c) => {
      const { name } = await bodyOf(c, false);
      const result = await refusing(async () => revokeCredential(await console.credentialStore(), name));
      await console.record(c.get('operator'), 'credentials.revoke', { credential: name });
      return c.json(result);
    });
  },
};

async function bodyOf(
  c: AdminContext,
  withSecrets: boolean,
): Promise<{ name: string; secrets: CredentialSecretsInput }> {
  if (!(c.req.header('content-type') ?? '').startsWith('application/json'))
    throw new UsageError('send the credential as JSON (content-type: application/json)');
  const body = (await c.req.json().catch(() => undefined)) as Record<string, unknown> | undefined;
  const name = body?.name;
  if (typeof name !== 'string' || name === '') throw new UsageError('name is required');
  if (withSecrets && (typeof body?.secrets !== 'object' || body.secrets === null))
    throw new UsageError('secrets is required: {oauth2?, mtls?, proxy?}');
  return { name, secrets: (body?.secrets ?? {}) as CredentialSecretsInput };
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
