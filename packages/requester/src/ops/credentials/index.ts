import { readFileSync } from 'node:fs';
import type { CredentialInfo, CredentialSecretsInput, CredentialStore } from '@requester/shared';
import { UsageError } from '@requester/shared';

/**
 * Named target credentials (docs/architecture.md §10), one operation with three faces: the CLI
 * (`requester credentials create|list|rotate|revoke|rewrap`, ./cli.ts), the admin API
 * (`/admin/api/credentials…`, ./api.ts, a write key to act). Views never carry a secret: a
 * credential shows as its name, version, master key id and summary (token endpoint, certificate
 * subject and expiry, proxy origin). Actions are recorded by their callers as `credentials.<verb>`
 * with the name as target, never the secrets.
 */
export interface CredentialView {
  name: string;
  id: string;
  version: number;
  masterKeyId: string;
  summary: CredentialInfo['summary'];
  createdAt: string;
  rotatedAt: string | null;
  revokedAt: string | null;
}

export function credentialView(info: CredentialInfo): CredentialView {
  return {
    name: info.name,
    id: info.id,
    version: info.version,
    masterKeyId: info.masterKeyId,
    summary: info.summary,
    createdAt: info.createdAt.toISOString(),
    rotatedAt: info.rotatedAt?.toISOString() ?? null,
    revokedAt: info.revokedAt?.toISOString() ?? null,
  };
}

export async function listCredentials(store: CredentialStore, all: boolean): Promise<CredentialView[]> {
  return (await store.list(all)).map(credentialView);
}

export async function createCredential(
  store: CredentialStore,
  name: string,
  secrets: CredentialSecretsInput,
): Promise<CredentialView> {
  return credentialView(await store.create(name, secrets));
}

export async function rotateCredential(
  store: CredentialStore,
  name: string,
  secrets: CredentialSecretsInput,
): Promise<CredentialView> {
  const rotated = await store.rotate(name, secrets);
  if (!rotated) throw new UsageError(`no live credential named ${name}`);
  return credentialView(rotated);
}

export async function revokeCredential(store: CredentialStore, name: string): Promise<{ revoked: string }> {
  if (!(await store.revoke(name))) throw new UsageError(`no live credential named ${name}`);
  return { revoked: name };
}

/** Master key rotation: every data key re-wrapped by the current (first) master key. */
export async function rewrapCredentials(store: CredentialStore): Promise<{ rewrapped: number }> {
  return { rewrapped: await store.rewrap() };
}

/** Where the CLI takes a credential's secrets from: files only, never the command line itself. */
export interface SecretSources {
  /** A JSON document of the whole credential (`-` = stdin). */
  fromFile?: string | undefined;
  tokenUrl?: string | undefined;
  clientId?: string | undefined;
  /** A file holding the client secret (`-` = stdin). */
  clientSecretFile?: string | undefined;
  authMethod?: string | undefined;
  scope?: string | undefined;
  audience?: string | undefined;
  certFile?: string | undefined;
  keyFile?: string | undefined;
  caFile?: string | undefined;
  /** A file holding the proxy URL (it may carry a password). */
  proxyFile?: string | undefined;
}

/**
 * The credential's secrets from `--from-file` and the per-part flags (a flag wins over the same
 * field of the file). The store validates the result; this only gathers it.
 */
export function secretsFrom(sources: SecretSources, read = readSource): CredentialSecretsInput {
  const base = (sources.fromFile ? parseJson(read(sources.fromFile), sources.fromFile) : {}) as Record<
    string,
    Record<string, unknown> | string | undefined
  >;
  const oauth2 = { ...((base.oauth2 as Record<string, unknown> | undefined) ?? {}) };
  const set = (target: Record<string, unknown>, key: string, value: string | undefined) => {
    if (value !== undefined) target[key] = value;
  };
  set(oauth2, 'tokenUrl', sources.tokenUrl);
  set(oauth2, 'clientId', sources.clientId);
  set(oauth2, 'clientSecret', sources.clientSecretFile && read(sources.clientSecretFile).trim());
  set(oauth2, 'authMethod', sources.authMethod);
  set(oauth2, 'scope', sources.scope);
  set(oauth2, 'audience', sources.audience);
  const mtls = { ...((base.mtls as Record<string, unknown> | undefined) ?? {}) };
  set(mtls, 'cert', sources.certFile && read(sources.certFile));
  set(mtls, 'key', sources.keyFile && read(sources.keyFile));
  set(mtls, 'ca', sources.caFile && read(sources.caFile));
  const secrets: Record<string, unknown> = { ...base };
  if (Object.keys(oauth2).length > 0) secrets.oauth2 = oauth2;
  if (Object.keys(mtls).length > 0) secrets.mtls = mtls;
  if (sources.proxyFile) secrets.proxy = read(sources.proxyFile).trim();
  return secrets as CredentialSecretsInput;
}

function readSource(file: string): string {
  try {
    return readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file === '-' ? 'stdin' : file}: ${(err as Error).message}`);
  }
}

function parseJson(text: string, file: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // Never quote the text: it holds secrets.
    throw new UsageError(`${file === '-' ? 'stdin' : file} is not a JSON document`);
  }
}
