import {
  type CredentialStore,
  credentialOriginRefusal,
  type OpenedCredential,
} from '@requester/shared/credentials';
import { RequesterError } from '@requester/shared/errors';
import type { Egress } from '../egress/index.ts';
import type { CallHooks, CallOutcome, FailureCode, HttpCall, HttpClient } from '../http/index.ts';
import { CredentialResolver, type Resolved } from './resolve.ts';
import { type TokenSettings, TokenSource } from './tokens.ts';

export { CredentialResolver, type Resolved } from './resolve.ts';
export { TokenSource } from './tokens.ts';

/**
 * Calls made with a named target credential (`meta.credentials`, docs/architecture.md §10). The
 * executor opens the credential from the store (PostgreSQL, sealed under the master key) and
 * trusts what it read for CREDENTIALS_CACHE_TTL, so a revoked or rotated credential is dropped
 * everywhere within it. Per credential version it keeps connection pools of its own (its client
 * certificate, its proxy: connections of two credentials never mix) and, with `oauth2`, sends
 * `Authorization: Bearer <token>` (replacing any the caller set). A 401 from the target drops
 * that token and the call is made once more with a fresh one.
 *
 * A credential goes only to the origins named with it (and only under a `Host` header naming the
 * URI's host): any other call ends in `credential_origin_refused` before a token is asked for or a
 * connection made, whatever reached the queue (the ingress refused it already; a record written
 * straight to `in` did not pass there). Redirects are never followed with a credential (the
 * call's `keepOrigin`).
 *
 * Failures before the call end the attempt like a failed call: `credential_unknown` (no such
 * credential), `credential_revoked`, `credential_origin_refused`, `credential_unavailable` (no
 * master key here, the token endpoint failed or did not answer in time, the store or Redis
 * unreachable). Never a throw: the
 * call runs inside the breaker's admission, which only an outcome gives back. Messages never
 * carry a secret.
 */
export interface CredentialSettings extends Omit<TokenSettings, 'http'> {
  /** The store; undefined when this process has no master key (then every credential is unavailable). */
  store: CredentialStore | undefined;
  /** CREDENTIALS_CACHE_TTL. */
  cacheTtlMs: number;
  /** The store's reader to share with the signer; default one of its own over `store`. */
  resolver?: CredentialResolver | undefined;
}

export function withCredentials(http: HttpClient, settings: CredentialSettings): HttpClient {
  const tokens = new TokenSource({ ...settings, http });
  const resolver = settings.resolver ?? new CredentialResolver(settings.store, settings.cacheTtlMs);
  /** Pools by credential name: the version they were made for, so a rotation replaces them. */
  const pools = new Map<string, { version: number; egress: Egress }>();

  function poolOf(credential: OpenedCredential): Egress {
    const known = pools.get(credential.name);
    if (known?.version === credential.version) return known.egress;
    if (known) retire(known.egress);
    const { mtls, proxy } = credential.secrets;
    const egress = http.egress({ tls: mtls, proxy });
    pools.set(credential.name, { version: credential.version, egress });
    return egress;
  }

  function dropPool(name: string): void {
    const known = pools.get(name);
    if (known) retire(known.egress);
    pools.delete(name);
  }

  async function callWith(
    asked: HttpCall & { credentials: string },
    hooks?: CallHooks,
  ): Promise<CallOutcome> {
    let request = asked;
    const started = process.hrtime.bigint();
    const failed = (code: FailureCode, message: string): CallOutcome => ({
      kind: 'failure',
      error: new RequesterError(code, message) as RequesterError & { code: FailureCode },
      durationNs: Number(process.hrtime.bigint() - started),
    });
    let resolved: Resolved;
    try {
      resolved = await resolver.resolve(request.credentials);
    } catch (err) {
      // No throw past this point: the call runs inside the breaker's admission, which only an outcome gives back.
      const why =
        err instanceof RequesterError && err.code === 'invalid_config' ? err.message : 'unavailable';
      return failed(
        'credential_unavailable',
        `credential ${request.credentials}: the credential store: ${why}`,
      );
    }
    if (resolved.kind === 'refused') {
      dropPool(request.credentials);
      return failed(resolved.code, resolved.message);
    }
    const { credential } = resolved;
    const refusal = credentialOriginRefusal(
      credential.name,
      credential.origins,
      request.uri,
      request.headers,
    );
    if (refusal) return failed('credential_origin_refused', refusal);
    const egress = poolOf(credential);
    // Whoever built the call: a redirect would carry the token or certificate to another origin.
    if (!request.keepOrigin) request = { ...request, keepOrigin: true };
    if (!credential.secrets.oauth2) return http.call(request, egress, hooks);
    const bearer = async () => {
      try {
        return await tokens.token(credential, egress);
      } catch (err) {
        if (err instanceof RequesterError && err.code === 'credential_unavailable') return err;
        return new RequesterError('credential_unavailable', 'the OAuth2 token cache (Redis) is unavailable');
      }
    };
    const first = await bearer();
    if (first instanceof RequesterError) return failed('credential_unavailable', first.message);
    const outcome = await http.call(authorized(request, first), egress, hooks);
    if (outcome.kind !== 'response' || outcome.status !== 401) return outcome;
    // The token may have been revoked or expired early at the authorization server: once more, fresh.
    await tokens.refused(credential, first);
    const second = await bearer();
    if (second instanceof RequesterError) return failed('credential_unavailable', second.message);
    return http.call(authorized(request, second), egress, hooks);
  }

  return {
    call: (request, egress, hooks) =>
      request.credentials === undefined
        ? http.call(request, egress, hooks)
        : callWith(request as HttpCall & { credentials: string }, hooks),
    egress: (identity) => http.egress(identity),
    close: () => {
      for (const { egress } of pools.values()) egress.destroy();
      pools.clear();
      http.close();
    },
  };
}

/**
 * Closes the pools of a replaced (rotated, revoked) credential version once the calls still using
 * them are over: at once would cut those calls. Their idle connections go then.
 */
const RETIRE_MS = 60_000;
function retire(egress: Egress): void {
  setTimeout(() => egress.destroy(), RETIRE_MS).unref();
}

/** The call with the credential's token, replacing any Authorization header the caller set. */
function authorized(request: HttpCall, token: string): HttpCall {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers))
    if (name.toLowerCase() !== 'authorization') headers[name] = value;
  headers.authorization = `Bearer ${token}`;
  return { ...request, headers };
}
