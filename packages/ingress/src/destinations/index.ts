import type { RequestEnvelope } from '@requester/shared/contract';
import { applyDestination, type DestinationCatalog } from '@requester/shared/destinations';
import type { Caller, Refusal } from '../auth/index.ts';

/**
 * `meta.destination` at the edge (docs/architecture.md §10, "Destinations"): a destination that
 * does not exist, or a request that would leave its base URL or outgrow its body limit, is a 400
 * before anything is written to `in` (the executor resolves the request again before each
 * attempt, against the destination's version of that moment). A destination carrying a credential
 * is a use of that credential: the key must list the destination (`--destinations`) or the
 * credential (`--credentials`); with AUTH=off, the credential must be one of
 * KAFKA_ANONYMOUS_CREDENTIALS, as for `meta.credentials`. Runs after the key's scope check.
 */
export class DestinationDoor {
  readonly #catalog: Pick<DestinationCatalog, 'current'>;
  readonly #anonymousCredentials: ReadonlySet<string>;

  constructor(
    catalog: Pick<DestinationCatalog, 'current'>,
    anonymousCredentials: ReadonlySet<string> = new Set(),
  ) {
    this.#catalog = catalog;
    this.#anonymousCredentials = anonymousCredentials;
  }

  /**
   * The call a request naming a destination makes (what the credential checks then judge: its
   * absolute URL, its credential) and the destination's default deadline, or the refusal; a
   * request naming none as it is.
   */
  async resolve(
    caller: Caller | undefined,
    envelope: RequestEnvelope,
  ): Promise<{ call: RequestEnvelope; defaultDeadline?: string } | { refusal: Refusal }> {
    const refusal = await this.refusal(caller, envelope);
    if (refusal) return { refusal };
    const destination = envelope.meta.destination && (await this.#catalog.current(envelope.meta.destination));
    if (!destination) return { call: envelope };
    const resolved = applyDestination(envelope, destination);
    if (!resolved.ok) return { refusal: invalid(resolved.path, resolved.message) };
    const { deadline } = destination.spec;
    return { call: resolved.envelope, ...(deadline === undefined ? {} : { defaultDeadline: deadline }) };
  }

  async refusal(caller: Caller | undefined, envelope: RequestEnvelope): Promise<Refusal | undefined> {
    const name = envelope.meta.destination;
    if (name === undefined) return undefined;
    let destination: Awaited<ReturnType<DestinationCatalog['current']>>;
    try {
      destination = await this.#catalog.current(name);
    } catch {
      return {
        status: 503,
        code: 'dependency_unavailable',
        detail: 'destinations cannot be read now (PostgreSQL does not answer); retry later',
        headers: { 'Retry-After': '5' },
      };
    }
    if (!destination)
      return invalid('meta.destination', `no destination named ${name} (requester destinations list)`);
    const resolved = applyDestination(envelope, destination);
    if (!resolved.ok) return invalid(resolved.path, resolved.message);
    const credential = destination.spec.credentials;
    if (credential === undefined) return undefined;
    const allowed = caller
      ? caller.scopes.destinations?.includes(name) || caller.scopes.credentials?.includes(credential)
      : this.#anonymousCredentials.has(credential);
    if (allowed) return undefined;
    const message = caller
      ? `the destination ${name} sends the credential ${credential}, which this API key may not use: list the destination (keys create --destinations) or the credential (--credentials)`
      : `the destination ${name} sends the credential ${credential}: with AUTH=off only the credentials of KAFKA_ANONYMOUS_CREDENTIALS may be used`;
    return {
      status: 403,
      code: 'forbidden',
      detail: `meta.destination: ${message}`,
      issues: [{ path: 'meta.destination', message }],
    };
  }
}

function invalid(path: string, message: string): Refusal {
  return { status: 400, code: 'invalid_request', detail: `${path}: ${message}`, issues: [{ path, message }] };
}
