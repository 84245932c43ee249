/**
 * The client namespace (docs/architecture.md §10). What a caller names — its requestId, partition,
 * cache key and limiter key — is its own: every place that keys state by such a name keys it by
 * `clientScoped(meta.client, name)`, so that another client using the same name meets other
 * state. This function is the only place that knows how.
 *
 * `<name> @<client>`: the caller's name first, so a prefix that means something keeps its meaning
 * (an ordered partition still starts with `!`). The space cannot occur in a name or a client
 * (both printable ASCII without spaces, `printableId`), so a scoped name equals no unscoped one
 * and no other client's. Without a client (records written straight to Kafka without
 * `meta.client`, AUTH=off) a name is its own key, exactly as before namespaces existed: state
 * written by earlier versions stays where it was.
 *
 * @module
 */

/** Between a name and its client in a scoped name. */
export const CLIENT_SCOPE_SEPARATOR = ' @';

/** `name` within the namespace of `client`; the name itself for no client (or an empty one). */
export function clientScoped(client: string | undefined, name: string): string {
  return client ? `${name}${CLIENT_SCOPE_SEPARATOR}${client}` : name;
}

/** The name of a scoped name (`clientScoped`'s inverse for the name; a name without client is itself). */
export function unscoped(scoped: string): string {
  const at = scoped.indexOf(CLIENT_SCOPE_SEPARATOR);
  return at < 0 ? scoped : scoped.slice(0, at);
}
