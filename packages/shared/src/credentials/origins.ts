import { ValidationError } from '../errors/index.ts';

/**
 * Where a credential may be sent (docs/architecture.md §10, "Target credentials"): a list of
 * origins, `scheme://host:port`, named when it is created. A request naming the credential (its
 * `meta.credentials`, or `meta.signing.keyId`) for any other origin is refused at the door and
 * again in the executor, so that a token, a client certificate or a signature never reaches a host
 * the credential's owner did not name, whatever hosts the calling API key may reach.
 */

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/** The origin of a URL, default port spelled out: `https://a` and `https://a:443` are one. */
export function credentialOriginOf(url: URL): string {
  const port = url.port || DEFAULT_PORTS[url.protocol] || '';
  return `${url.protocol}//${url.hostname.toLowerCase()}:${port}`;
}

/**
 * An origin as an operator writes it (`https://api.partner.example`, `http://127.0.0.1:8081`),
 * normalized; a ValidationError naming `origins` for anything that is not only a scheme, a host and
 * an optional port (a path, a query, user info or a wildcard would blur what is bound).
 */
export function parseCredentialOrigin(text: string): string {
  const trimmed = text.trim();
  const url = URL.parse(trimmed);
  const refuse = (why: string) =>
    new ValidationError([{ path: 'origins', message: `${JSON.stringify(text)} ${why}` }]);
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '')
    throw refuse('is not an http(s) origin, e.g. https://api.partner.example or http://10.0.0.5:8080');
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== ''))
    throw refuse('must be scheme://host[:port] only: no path, query, fragment or user');
  if (trimmed.includes('*')) throw refuse('must name one host (no wildcard)');
  return credentialOriginOf(url);
}

/** A list of origins (an array, or comma-separated text), normalized, without duplicates; at least one. */
export function parseCredentialOrigins(input: readonly string[] | string): string[] {
  const items = (typeof input === 'string' ? input.split(',') : input)
    .map((item) => item.trim())
    .filter(Boolean);
  if (items.length === 0)
    throw new ValidationError([
      {
        path: 'origins',
        message: 'name at least one origin the credential may be sent to (scheme://host[:port])',
      },
    ]);
  return [...new Set(items.map(parseCredentialOrigin))];
}

/**
 * Why a credential bound to `origins` may not go with a call to `uri` (with `headers`), or
 * undefined when it may. `origins` undefined: a credential created before origins existed, refused
 * until an operator names them (`requester credentials set-origins`). A `Host` header naming
 * another host than the URI's would have the target's server route the credential elsewhere: it is
 * refused too.
 */
export function credentialOriginRefusal(
  name: string,
  origins: readonly string[] | undefined,
  uri: string,
  headers?: Readonly<Record<string, string>>,
): string | undefined {
  if (!origins || origins.length === 0)
    return `credential ${name} has no origins to be sent to yet: an operator names them (requester credentials set-origins ${name} --origins https://…)`;
  const url = URL.parse(uri);
  if (!url) return `credential ${name}: the request URI is not a URL`;
  const origin = credentialOriginOf(url);
  if (!origins.includes(origin))
    return `credential ${name} may not be sent to ${origin} (its origins: ${origins.join(', ')})`;
  const host = hostHeaderOf(headers);
  if (host !== undefined && !hostHeaderMatches(host, url))
    return `credential ${name}: the Host header must name the URI's host (${url.host})`;
  return undefined;
}

/** The value of the `Host` header among `headers`, in any case; undefined when there is none. */
export function hostHeaderOf(headers: Readonly<Record<string, string>> | undefined): string | undefined {
  if (!headers) return undefined;
  for (const name in headers) if (name.toLowerCase() === 'host') return headers[name];
  return undefined;
}

/**
 * Whether a `Host` header names the host of `url`: the same host name (any case), and, when it
 * carries a port, the URL's port (default ports spelled out or not). Anything but a plain
 * `host[:port]` matches nothing.
 */
export function hostHeaderMatches(header: string, url: URL): boolean {
  const text = header.trim();
  if (!/^[A-Za-z0-9._~-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(text)) return false;
  const parsed = URL.parse(`${url.protocol}//${text}`);
  if (!parsed || parsed.hostname.toLowerCase() !== url.hostname.toLowerCase()) return false;
  const hasPort = /^\[.*\]:\d+$|^[^[:]+:\d+$/.test(text);
  return !hasPort || credentialOriginOf(parsed) === credentialOriginOf(url);
}
