import type { RequestEnvelope } from '@requester/shared/contract';
import { credentialOriginRefusal } from '@requester/shared/credentials';

/**
 * `meta.credentials` and `meta.signing.keyId` at the edge: a request naming no live credential is
 * refused with 400 `credential_unknown`, and one sending a credential elsewhere than its origins
 * (or with a `Host` header naming another host) with 403 `credential_origin_refused`, before it is
 * written to `in`, instead of failing later on an executor (which checks the origins again). The
 * names and origins are read from PostgreSQL at most once per CREDENTIALS_CACHE_TTL per process
 * (never a secret: the ingress never opens a credential), so a new credential or a change of its
 * origins is in force everywhere within that. Runs after the API key's scope check, so a key
 * learns nothing of the names outside its scope. A signing key id the store does not hold may be
 * one of the deprecated SIGNING_KEYS: the executor judges it.
 */
export interface CredentialRefusal {
  status: 400 | 403 | 503;
  code: 'credential_unknown' | 'credential_origin_refused' | 'dependency_unavailable';
  detail: string;
  headers?: Record<string, string>;
  issues?: Array<{ path: string; message: string }>;
}

/** The live credentials by name, with their origins (undefined: none named yet). */
export type LiveCredentials = Map<string, readonly string[] | undefined>;

export class CredentialNames {
  readonly #load: () => Promise<LiveCredentials>;
  readonly #ttlMs: number;
  #cached: { at: number; live: Promise<LiveCredentials> } | undefined;

  constructor(load: () => Promise<LiveCredentials>, ttlMs: number) {
    this.#load = load;
    this.#ttlMs = ttlMs;
  }

  async refusal(envelope: RequestEnvelope): Promise<CredentialRefusal | undefined> {
    const name = envelope.meta.credentials;
    const keyId = envelope.meta.signing?.keyId;
    if (name === undefined && keyId === undefined) return undefined;
    let live: LiveCredentials;
    try {
      live = await this.#live();
    } catch {
      return {
        status: 503,
        code: 'dependency_unavailable',
        detail: 'credentials cannot be checked now (PostgreSQL does not answer); retry later',
        headers: { 'Retry-After': '5' },
      };
    }
    if (name !== undefined && !live.has(name)) {
      const message = `no live credential named ${name} (requester credentials list)`;
      return {
        status: 400,
        code: 'credential_unknown',
        detail: `meta.credentials: ${message}`,
        issues: [{ path: 'meta.credentials', message }],
      };
    }
    const issues: Array<{ path: string; message: string }> = [];
    const { uri, headers } = envelope.request;
    // A wake-up (empty uri) sends nothing anywhere.
    if (uri !== '') {
      for (const [path, named] of [
        ['meta.credentials', name],
        ['meta.signing.keyId', keyId],
      ] as const) {
        if (named === undefined || !live.has(named)) continue;
        const why = credentialOriginRefusal(named, live.get(named), uri, headers);
        if (why) issues.push({ path, message: why });
      }
    }
    if (issues.length === 0) return undefined;
    return {
      status: 403,
      code: 'credential_origin_refused',
      detail: issues.map((issue) => `${issue.path}: ${issue.message}`).join('; '),
      issues,
    };
  }

  #live(): Promise<LiveCredentials> {
    const now = Date.now();
    if (this.#cached && now - this.#cached.at < this.#ttlMs) return this.#cached.live;
    const live = this.#load();
    this.#cached = { at: now, live };
    live.catch(() => {
      if (this.#cached?.live === live) this.#cached = undefined;
    });
    return live;
  }
}
