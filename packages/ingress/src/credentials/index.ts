import type { RequestEnvelope } from '@requester/shared/contract';

/**
 * `meta.credentials` at the edge: a request naming no live credential is refused with 400
 * `credential_unknown` before it is written to `in`, instead of failing later on an executor. The
 * names are read from PostgreSQL at most once per CREDENTIALS_CACHE_TTL per process (the names
 * only: the ingress never opens a credential), so a new credential is accepted everywhere within
 * that. Runs after the API key's scope check, so a key learns nothing of the names outside its scope.
 */
export interface CredentialRefusal {
  status: 400 | 503;
  code: 'credential_unknown' | 'dependency_unavailable';
  detail: string;
  headers?: Record<string, string>;
  issues?: Array<{ path: string; message: string }>;
}

export class CredentialNames {
  readonly #load: () => Promise<Set<string>>;
  readonly #ttlMs: number;
  #cached: { at: number; names: Promise<Set<string>> } | undefined;

  constructor(load: () => Promise<Set<string>>, ttlMs: number) {
    this.#load = load;
    this.#ttlMs = ttlMs;
  }

  async refusal(envelope: RequestEnvelope): Promise<CredentialRefusal | undefined> {
    const name = envelope.meta.credentials;
    if (name === undefined) return undefined;
    let names: Set<string>;
    try {
      names = await this.#names();
    } catch {
      return {
        status: 503,
        code: 'dependency_unavailable',
        detail: 'credentials cannot be checked now (PostgreSQL does not answer); retry later',
        headers: { 'Retry-After': '5' },
      };
    }
    if (names.has(name)) return undefined;
    const message = `no live credential named ${name} (requester credentials list)`;
    return {
      status: 400,
      code: 'credential_unknown',
      detail: `meta.credentials: ${message}`,
      issues: [{ path: 'meta.credentials', message }],
    };
  }

  #names(): Promise<Set<string>> {
    const now = Date.now();
    if (this.#cached && now - this.#cached.at < this.#ttlMs) return this.#cached.names;
    const names = this.#load();
    this.#cached = { at: now, names };
    names.catch(() => {
      if (this.#cached?.names === names) this.#cached = undefined;
    });
    return names;
  }
}
