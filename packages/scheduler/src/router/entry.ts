/**
 * Kafka entry at the router (docs/architecture.md §10): which `meta.client` and which credentials
 * a record written straight to `in` may claim.
 *
 * @module
 */

import { errorResult, type RequestEnvelope } from '@requester/shared/contract';
import type { DestinationCatalog } from '@requester/shared/destinations';
import type { EntrySigner, KafkaEntryClients } from '@requester/shared/entry';
import type { KafkaRecord } from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import type { Route } from './route.ts';

export interface KafkaEntry {
  /** Verifies the signature Requester's own writers of `in` put on their records. */
  signer: Pick<EntrySigner, 'verify'>;
  /**
   * The clients an unsigned record may claim (keys marked for Kafka entry), with their credentials
   * scopes and default deadlines.
   */
  clients: Pick<KafkaEntryClients, 'scopes'> & Partial<Pick<KafkaEntryClients, 'deadlines'>>;
  /** KAFKA_ENTRY=report: a claim that would be refused is only logged and counted (upgrades). */
  reportOnly?: boolean;
  /**
   * KAFKA_ANONYMOUS_CREDENTIALS: credentials any record written straight to `in` may name, with or
   * without a client. Others only a claimed client whose key's credentials scope lists them.
   */
  anonymousCredentials?: ReadonlySet<string>;
  /**
   * The destinations a record may name: a destination's credential is a credential the record
   * names (the same rule), since its calls carry it.
   */
  destinations?: Pick<DestinationCatalog, 'current'>;
}

const refusedClaims = counter(
  'router_refused_claims_total',
  'records written straight to in that claimed a meta.client not allowed for Kafka entry: refused (answered forbidden and dead-lettered), or reported (KAFKA_ENTRY=report: let through)',
  ['action'],
);

const refusedCredentials = counter(
  'router_refused_credentials_total',
  'records written straight to in that named a credential (meta.credentials, meta.signing.keyId) their claimed client may not use, or that no client was claimed for and KAFKA_ANONYMOUS_CREDENTIALS does not list: refused (answered forbidden and dead-lettered), or reported (KAFKA_ENTRY=report: let through)',
  ['action'],
);

/**
 * Kafka entry: a record with a `meta.client` that Requester's own writers did not sign came
 * straight from a producer, and may claim only a client allowed for Kafka entry. Another claim
 * is answered `forbidden` (without the client: the result is nobody's to read over HTTP) and
 * dead-lettered with the raw record, not an envelope, so a DLQ replay (which signs) can never
 * turn it into a trusted one. A PostgreSQL outage fails the batch (retried, uncommitted).
 *
 * Such a record's credentials (`meta.credentials`, `meta.signing.keyId`) follow the HTTP door's
 * rule: its claimed client's key must list them, unless the operator lets every producer of
 * `in` use them (KAFKA_ANONYMOUS_CREDENTIALS). The broker's ACL on `in` is no gate where the
 * broker has none; a record refused this way is answered and dead-lettered alike.
 */
export async function admitClaims(
  routes: Array<{ record: KafkaRecord; route: Route }>,
  entry: KafkaEntry,
  logger: Logger,
): Promise<void> {
  const viaDestination = await destinationCredentials(routes, entry);
  const claims = routes.flatMap((routed) => {
    const { record, route } = routed;
    if (route.kind === 'invalid') return [];
    const { client, credentials, signing } = route.envelope.meta;
    const named = [credentials, signing?.keyId, viaDestination.get(route)].filter(
      (name): name is string => name !== undefined && !entry.anonymousCredentials?.has(name),
    );
    if (client === undefined && named.length === 0) return [];
    if (entry.signer.verify(record.value, record.headers)) return [];
    return [{ routed, envelope: route.envelope, client, named }];
  });
  if (claims.length === 0) return;
  const clients = new Set(claims.flatMap((claim) => (claim.client === undefined ? [] : [claim.client])));
  const allowed =
    clients.size > 0 ? await entry.clients.scopes(clients) : new Map<string, readonly string[]>();
  for (const { routed, envelope, client, named } of claims) {
    if (client === undefined || allowed.has(client)) {
      const scope = client === undefined ? [] : (allowed.get(client) ?? []);
      const outside = named.filter((name) => !scope.includes(name));
      if (outside.length > 0) refuseCredentials(routed, envelope, client, outside, entry, logger);
      continue;
    }
    const { requestId, proxyData } = envelope.meta;
    const { partition, offset } = routed.record;
    if (entry.reportOnly) {
      refusedClaims.inc({ action: 'reported' });
      logger.warn(
        { requestId, claimedClient: client, partition, offset },
        'a record written straight to in claimed a client not allowed for Kafka entry: let through (KAFKA_ENTRY=report)',
      );
      continue;
    }
    refusedClaims.inc({ action: 'refused' });
    logger.warn(
      { requestId, claimedClient: client, partition, offset },
      'a record written straight to in claimed a client not allowed for Kafka entry: refused',
    );
    const message =
      `meta.client ${JSON.stringify(client)} may not be claimed by a record written straight to ` +
      'in: only the ingress (from the API key), the relay and DLQ replays set a client, or a key an ' +
      'operator allowed for Kafka entry (requester keys update <key> --kafka-entry); leave meta.client out';
    const result = errorResult(requestId, 'forbidden', message, {
      tryCount: envelope.tryCount ?? 0,
      proxyData,
    });
    routed.route = { kind: 'invalid', result };
  }
}

/**
 * The credential each routed record's destination sends (a destination that does not exist is
 * answered by the executor). Throws when the destinations cannot be read: the batch is retried.
 */
async function destinationCredentials(
  routes: Array<{ record: KafkaRecord; route: Route }>,
  entry: KafkaEntry,
): Promise<Map<Route, string>> {
  const found = new Map<Route, string>();
  if (!entry.destinations) return found;
  for (const { route } of routes) {
    const name = route.kind === 'invalid' ? undefined : route.envelope.meta.destination;
    if (name === undefined) continue;
    const credential = (await entry.destinations.current(name))?.spec.credentials;
    if (credential !== undefined) found.set(route, credential);
  }
  return found;
}

/** A record written straight to `in` naming credentials it may not use: see admitClaims. */
function refuseCredentials(
  routed: { record: KafkaRecord; route: Route },
  envelope: RequestEnvelope,
  client: string | undefined,
  outside: readonly string[],
  entry: KafkaEntry,
  logger: Logger,
): void {
  const { requestId, proxyData } = envelope.meta;
  const { partition, offset } = routed.record;
  const facts = { requestId, claimedClient: client, credentials: outside, partition, offset };
  if (entry.reportOnly) {
    refusedCredentials.inc({ action: 'reported' });
    logger.warn(
      facts,
      'a record written straight to in named a credential its client may not use: let through (KAFKA_ENTRY=report)',
    );
    return;
  }
  refusedCredentials.inc({ action: 'refused' });
  logger.warn(facts, 'a record written straight to in named a credential its client may not use: refused');
  const names = outside.map((name) => JSON.stringify(name)).join(', ');
  const message =
    client === undefined
      ? `credential ${names} may not be used by a record written straight to in without a client: ` +
        'claim a key allowed for Kafka entry whose credentials scope lists it (requester keys update <key> ' +
        '--kafka-entry; keys create --credentials), or an operator lists it in KAFKA_ANONYMOUS_CREDENTIALS'
      : `credential ${names} is not in the credentials scope of ${JSON.stringify(client)} ` +
        '(requester keys create --credentials), nor in KAFKA_ANONYMOUS_CREDENTIALS';
  const result = errorResult(requestId, 'forbidden', message, {
    tryCount: envelope.tryCount ?? 0,
    proxyData,
  });
  routed.route = { kind: 'invalid', result };
}
