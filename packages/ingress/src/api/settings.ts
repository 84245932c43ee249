import type { CancelOutcome } from '@requester/shared/cancel';
import type { Journal, JournalEvent, JournalLookup } from '@requester/shared/journal';
import type { Logger } from '@requester/shared/log';
import type { Access } from '../auth/index.ts';
import { ByteBudget } from '../body/index.ts';
import type { ClaimRequestId } from '../claims/index.ts';
import type { CredentialNames } from '../credentials/index.ts';
import type { DestinationDoor } from '../destinations/index.ts';
import { BodyBudgets, KeySlots } from '../fair/index.ts';
import type { Hub } from '../hub/index.ts';

/** Writes one record (Kafka key, JSON text, service-set headers) to `in`. */
export type Submit = (key: string, value: string, headers?: Record<string, string>) => Promise<void>;

export interface ApiParts {
  /** Writes an accepted envelope to `in`; rejects unless Kafka acknowledged it (ingress role). */
  submit?: Submit;
  /** Claims a requestId for one request within the dedup window (ingress role; absent = no check). */
  claim?: ClaimRequestId;
  /**
   * Results from `out` or this gateway's reply channel (sync-gateway role), by result id: the
   * requestId in its client's namespace (`clientScoped`, see results/resultIdOf).
   */
  hub?: Hub<string>;
  /** The task journal: `accepted` (ingress); absent = none. */
  journal?: Journal;
  /** Reads one request's journal (sync-gateway: GET /requests/{id}/events). */
  readJournal?: (lookup: JournalLookup) => Promise<JournalEvent[]>;
  /** This process's gateway id: sync requests are stamped with it so their results come to its Hub. */
  replyTo?: string;
  /** A result kept in Redis by the executors (SYNC_FOLLOW_OUT=false), for long-polls; by result id. */
  lookup?: (resultId: string) => Promise<string | undefined>;
  /** Each role's logger, so a request's log lines carry the role that served it. */
  ingressLog?: Logger;
  gatewayLog?: Logger;
  /**
   * Cancels a client's request (ingress role; @requester/shared cancelRequest): `by` is who asked.
   */
  cancel?: (client: string | undefined, requestId: string, by: string) => Promise<CancelOutcome>;
  /**
   * Whether a client's requestId names a request known here (ingress role: claimed within
   * QUEUE_DEDUP_WINDOW, cancelled already, or in the outbox); absent = every id is (then a cancel
   * of an unknown id is recorded and meets nothing).
   */
  known?: (client: string | undefined, requestId: string) => Promise<boolean>;
  /** Shutdown began: waits are cut short (202 / 404 pending) and connections are not kept alive. */
  closing?: boolean;
}

export interface ApiSettings {
  maxBodyBytes: number;
  /** Bytes of request bodies read and handled at once (MAX_BODY_BYTES_IN_FLIGHT); default unbounded. */
  maxBodyBytesInFlight?: number;
  /** Of those, what one API key may hold (see bodyBytesPerKey); default unbounded. */
  maxBodyBytesInFlightPerKey?: number;
  /** Sync calls and long-polls of one API key waiting at once (SYNC_MAX_WAITERS_PER_KEY); default unbounded. */
  maxWaitersPerKey?: number;
  /** Journal lookups of one API key at once (EVENTS_MAX_LOOKUPS_PER_KEY); default unbounded. */
  maxEventLookupsPerKey?: number;
  syncTimeoutMs: number;
  longPollMaxMs: number;
  /** Retry-After of a 503 (seconds). */
  unavailableRetryAfterSeconds?: number;
  /** API keys and their scopes (`auth/`): `openAccess()` when AUTH=off. */
  access: Access;
  /** The live credential names `meta.credentials` may name (`credentials/`); absent = not checked here. */
  credentialNames?: CredentialNames | undefined;
  /** The destinations `meta.destination` may name (`destinations/`); absent = not checked here. */
  destinations?: DestinationDoor | undefined;
}

/** What the API holds for its callers, bounded for the instance and per API key (see ../fair). */
export interface Fairness {
  bodies: BodyBudgets;
  waits: KeySlots;
  lookups: KeySlots;
}

export function fairness(settings: ApiSettings): Fairness {
  const unbounded = Number.POSITIVE_INFINITY;
  const instance = new ByteBudget(settings.maxBodyBytesInFlight ?? unbounded);
  return {
    bodies: new BodyBudgets(instance, settings.maxBodyBytesInFlightPerKey ?? unbounded),
    waits: new KeySlots(settings.maxWaitersPerKey ?? unbounded),
    lookups: new KeySlots(settings.maxEventLookupsPerKey ?? unbounded),
  };
}
