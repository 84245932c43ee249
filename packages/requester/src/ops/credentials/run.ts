import {
  CredentialStore,
  Dependencies,
  masterKeysFromConfig,
  UsageError,
  ValidationError,
} from '@requester/shared';
import { commandLogger } from '../../commands/clients.ts';
import { type ConfigFrom, cliActor, printJson, printTable, progress } from '../../commands/common.ts';
import { recordAdminAction } from '../audit.ts';
import { humanTime } from '../format.ts';
import {
  type CredentialView,
  createCredential,
  importSigningKeys,
  listCredentials,
  revokeCredential,
  rewrapCredentials,
  rotateCredential,
  type SecretSources,
  secretsFrom,
  setCredentialOrigins,
} from './index.ts';

type Action = 'create' | 'list' | 'rotate' | 'revoke' | 'rewrap' | 'import-signing' | 'set-origins';

interface CredentialsArgs extends SecretSources {
  action: Action;
  name?: string;
  origins?: string;
  all: boolean;
  json: boolean;
}

/** `requester credentials`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function credentials(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const args = argv as unknown as CredentialsArgs;
  const config = configFrom(argv);
  const logger = commandLogger(config);
  const deps = new Dependencies(config, logger);
  try {
    const store = new CredentialStore(await deps.sql(), masterKeysFromConfig(config));
    const done = await runAction(store, args, () => config.signingKeys.reveal());
    if (done)
      await recordAdminAction(logger, {
        action: `credentials.${args.action}`,
        actor: cliActor(),
        target: done,
        outcome: 'done',
      });
  } catch (err) {
    if (err instanceof ValidationError) throw new UsageError(err.message);
    throw err;
  } finally {
    await deps.close();
  }
}

/** Runs the action and prints its result; returns the target of an action to record. */
async function runAction(
  store: CredentialStore,
  args: CredentialsArgs,
  signingKeys: () => string,
): Promise<Record<string, unknown> | undefined> {
  switch (args.action) {
    case 'list': {
      const views = await listCredentials(store, args.all);
      if (args.json) printJson(views);
      else printTable(views.map(row));
      return undefined;
    }
    case 'create':
    case 'rotate': {
      const name = nameArg(args);
      if (args.action === 'create' && !args.origins)
        throw new UsageError(
          'credentials create needs --origins: the origins (scheme://host[:port], comma-separated) it may be sent to',
        );
      const secrets = secretsFrom(args);
      const view =
        args.action === 'create'
          ? await createCredential(store, name, secrets, args.origins as string)
          : await rotateCredential(store, name, secrets);
      progress(
        `credential ${name} ${args.action === 'create' ? 'created' : `rotated to version ${view.version}`}`,
      );
      if (args.json) printJson(view);
      return { credential: name, version: view.version };
    }
    case 'set-origins': {
      const name = nameArg(args);
      if (!args.origins)
        throw new UsageError(
          'credentials set-origins needs --origins (scheme://host[:port], comma-separated)',
        );
      const view = await setCredentialOrigins(store, name, args.origins);
      progress(
        `credential ${name} may be sent to ${view.origins.join(', ')} (in force everywhere within CREDENTIALS_CACHE_TTL)`,
      );
      if (args.json) printJson(view);
      return { credential: name, origins: view.origins };
    }
    case 'revoke': {
      const name = nameArg(args);
      const result = await revokeCredential(store, name);
      progress(`revoked ${name}; executors refuse it within CREDENTIALS_CACHE_TTL (credential_revoked)`);
      if (args.json) printJson(result);
      return { credential: name };
    }
    case 'import-signing': {
      const imported = await importSigningKeys(store, signingKeys());
      if (args.json) printJson(imported);
      else printTable(imported.map(({ version, ...rest }) => ({ ...rest, version: version ?? '-' })));
      const created = imported.filter((k) => k.outcome === 'created').map((k) => k.keyId);
      progress(
        `imported ${created.length} of ${imported.length} SIGNING_KEYS ids as signing credentials; ` +
          'name where each may sign for (credentials set-origins <id> --origins …: refused until then), ' +
          'grant them to API keys (keys create --credentials), then unset SIGNING_KEYS',
      );
      return created.length > 0 ? { credentials: created } : undefined;
    }
    case 'rewrap': {
      const result = await rewrapCredentials(store);
      progress(`re-wrapped ${result.rewrapped} credentials with the current master key`);
      if (args.json) printJson(result);
      return result;
    }
  }
}

function nameArg(args: CredentialsArgs): string {
  if (!args.name) throw new UsageError(`credentials ${args.action} needs a credential name`);
  return args.name;
}

function row(view: CredentialView) {
  const { oauth2, mtls, proxy, signing } = view.summary;
  return {
    name: view.name,
    kind: view.kind,
    version: view.version,
    origins: view.origins.length > 0 ? view.origins.join(',') : 'none: refused (set-origins)',
    oauth2: oauth2 ? `${oauth2.tokenUrl} (${oauth2.authMethod})` : '-',
    mtls: mtls ? `${mtls.subject} until ${mtls.validTo}` : '-',
    proxy: proxy ?? '-',
    signing: signing ? `${signing.scheme} x${signing.secrets}` : '-',
    masterKey: view.masterKeyId,
    created: humanTime(Date.parse(view.createdAt)),
    rotated: humanTime(view.rotatedAt ? Date.parse(view.rotatedAt) : undefined),
    revoked: humanTime(view.revokedAt ? Date.parse(view.revokedAt) : undefined),
  };
}
