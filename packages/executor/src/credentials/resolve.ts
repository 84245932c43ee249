import type { CredentialStore, OpenedCredential } from '@requester/shared/credentials';
import type { FailureCode } from '../http/index.ts';

/** A credential name, resolved: the live credential, or why a request naming it is refused. */
export type Resolved =
  | { kind: 'live'; credential: OpenedCredential }
  | { kind: 'refused'; code: FailureCode; message: string };

interface Entry {
  readAtMs: number;
  resolved: Promise<Resolved>;
}

/**
 * The executor's one read of the credential store, shared by its users (target credentials, the
 * signer): each name is opened at most once per CREDENTIALS_CACHE_TTL, concurrent asks sharing the
 * read, so a revoked or rotated credential is dropped everywhere within it. A read that failed (the
 * store down) is not kept: the next ask reads again; it rejects, for its caller to judge.
 */
export class CredentialResolver {
  readonly #store: CredentialStore | undefined;
  readonly #ttlMs: number;
  readonly #entries = new Map<string, Entry>();

  /** `store` undefined: this process has no master key (every credential is unavailable). */
  constructor(store: CredentialStore | undefined, ttlMs: number) {
    this.#store = store;
    this.#ttlMs = ttlMs;
  }

  get hasStore(): boolean {
    return this.#store !== undefined;
  }

  resolve(name: string): Promise<Resolved> {
    const now = Date.now();
    const known = this.#entries.get(name);
    if (known && now - known.readAtMs < this.#ttlMs) return known.resolved;
    const resolved = this.#open(name);
    this.#entries.set(name, { readAtMs: now, resolved });
    resolved.catch(() => {
      if (this.#entries.get(name)?.resolved === resolved) this.#entries.delete(name);
    });
    if (this.#entries.size > 10_000) this.#entries.delete(this.#entries.keys().next().value as string);
    return resolved;
  }

  async #open(name: string): Promise<Resolved> {
    if (!this.#store)
      return refused(
        'credential_unavailable',
        `credential ${name}: this executor has no CREDENTIALS_MASTER_KEY`,
      );
    const { credential, revoked } = await this.#store.open(name);
    if (credential) return { kind: 'live', credential };
    return revoked
      ? refused('credential_revoked', `credential ${name} is revoked`)
      : refused('credential_unknown', `no credential named ${name}`);
  }
}

function refused(code: FailureCode, message: string): Resolved {
  return { kind: 'refused', code, message };
}
