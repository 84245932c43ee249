import { readFileSync } from 'node:fs';
import type { CredentialInfo, CredentialSecretsInput, CredentialStore } from '@requester/shared';
import { CREDENTIAL_NAME_PATTERN, kindsOf, parseSigningKeys, UsageError } from '@requester/shared';

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
  /** What it holds, e.g. `signing`, `oauth2+mtls` (from its summary). */
  kind: string;
  id: string;
  version: number;
  masterKeyId: string;
  summary: CredentialInfo['summary'];
  /** Where it may be sent (`scheme://host:port`); empty: none named yet, so refused everywhere. */
  origins: string[];
  createdAt: string;
  rotatedAt: string | null;
  revokedAt: string | null;
}

export function credentialView(info: CredentialInfo): CredentialView {
  return {
    name: info.name,
    kind: kindsOf(info.summary).join('+'),
    id: info.id,
    version: info.version,
    masterKeyId: info.masterKeyId,
    summary: info.summary,
    origins: info.origins ?? [],
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
  origins: readonly string[] | string,
): Promise<CredentialView> {
  return credentialView(await store.create(name, secrets, origins));
}

/** Where the live credential `name` may be sent, replacing its list (the upgrade of an older one). */
export async function setCredentialOrigins(
  store: CredentialStore,
  name: string,
  origins: readonly string[] | string,
): Promise<CredentialView> {
  const updated = await store.setOrigins(name, origins);
  if (!updated) throw new UsageError(`no live credential named ${name}`);
  return credentialView(updated);
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

/** What `credentials import-signing` did with each key id of SIGNING_KEYS. */
export interface ImportedKey {
  keyId: string;
  outcome: 'created' | 'exists' | 'bad-name';
  secrets: number;
  version?: number;
}

/**
 * The migration off SIGNING_KEYS (deprecated): each key id becomes a `signing` credential of that
 * name holding its secrets in order. Ids with a live credential already are left alone (rotate
 * those by hand if they differ), ids that are no credential name are reported (rename them:
 * requests must then name the new id). Running it twice changes nothing.
 */
export async function importSigningKeys(store: CredentialStore, text: string): Promise<ImportedKey[]> {
  parseSigningKeys(text); // every entry valid, or a ConfigError naming it (never its secret)
  const byId = new Map<string, string[]>();
  for (const entry of text.split(';').map((e) => e.trim())) {
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    const keyId = entry.slice(0, eq).trim();
    byId.set(keyId, [...(byId.get(keyId) ?? []), entry.slice(eq + 1).trim()]);
  }
  if (byId.size === 0) throw new UsageError('SIGNING_KEYS is empty: there is nothing to import');
  const live = await store.liveNames();
  const done: ImportedKey[] = [];
  for (const [keyId, secrets] of byId) {
    const row = { keyId, secrets: secrets.length };
    if (!CREDENTIAL_NAME_PATTERN.test(keyId)) done.push({ ...row, outcome: 'bad-name' });
    else if (live.has(keyId)) done.push({ ...row, outcome: 'exists' });
    else {
      // Where each may sign for is not in SIGNING_KEYS: refused until an operator names it (set-origins).
      const info = await store.create(keyId, { signing: secrets }, null);
      done.push({ ...row, outcome: 'created', version: info.version });
    }
  }
  return done;
}

/** The kinds the operator UI's form makes (mTLS takes PEM files: the CLI's --cert-file, --key-file). */
export const FORM_KINDS = ['signing', 'oauth2', 'proxy'] as const;

/**
 * A credential's secrets from the operator UI's form (flat fields, by `kind`): `signing` (and
 * `signingPrevious`, the secret still signing during a rotation); `tokenUrl`, `clientId`,
 * `clientSecret`, `authMethod`, `scope`, `audience`; `proxy`. Blank fields are absent. The store
 * validates the result.
 */
export function secretsFromForm(body: Record<string, unknown>): CredentialSecretsInput {
  const field = (name: string) => {
    const value = body[name];
    return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
  };
  const present = (fields: Record<string, string | undefined>) =>
    Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
  switch (field('kind')) {
    case 'signing':
      return { signing: [field('signing'), field('signingPrevious')].filter((s) => s !== undefined) };
    case 'oauth2':
      return {
        oauth2: present({
          tokenUrl: field('tokenUrl'),
          clientId: field('clientId'),
          clientSecret: field('clientSecret'),
          authMethod: field('authMethod'),
          scope: field('scope'),
          audience: field('audience'),
        }) as never,
      };
    case 'proxy':
      return { proxy: field('proxy') as string };
    default:
      throw new UsageError(
        `kind must be one of ${FORM_KINDS.join(', ')} (mTLS: requester credentials create --cert-file …)`,
      );
  }
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
  /** A file holding signing secrets, one a line (several: all sign, a rotation). */
  signingSecretFile?: string | undefined;
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
  if (sources.signingSecretFile) secrets.signing = linesOf(read(sources.signingSecretFile));
  return secrets as CredentialSecretsInput;
}

/** Signing secrets, one a line: blank lines and `#` comments skipped. */
export function linesOf(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
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
