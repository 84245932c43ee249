import type { KeyInfo, KeyStore } from '@requester/ingress';
import type { ClientInfo, QueueAdmin } from '@requester/queue';
import { UsageError } from '@requester/shared';

/**
 * The clients as the queue shares the workers between them (issue 21's fair share, issue 22's
 * Clients page): per client with a backlog, largest first — its pending tasks, ready partitions,
 * how long its next task has waited, its weight — joined with what its API key says: its rate,
 * and its cap of calls in flight when the key has one. `queue info --by-client` (./cli.ts) prints
 * the queue's part; `/admin/api/clients` and the Clients page show the whole.
 *
 * In flight per client is shown when the queue reports it (the queue counts leases per shard, not
 * per client); the key columns come from the key store, so a column added to keys (a cap) shows.
 */
export interface ClientView {
  /** The API key name; '' for requests without a client. */
  client: string;
  backlog: number;
  /** Its partitions ready to run now; null when not counted (the Clients page's live view). */
  readyPartitions: number | null;
  /** Tasks leased now; null when the queue does not count them per client. */
  inFlight: number | null;
  weight: number;
  /** The key's cap of calls in flight; null: none. */
  cap: number | null;
  /** The key's rate (`200/s`); null: none. */
  rate: string | null;
  /** How long its next task has waited (ms); null: none ready. */
  oldestWaitMs: number | null;
  /** Whether a live key of this name exists (a backlog of a revoked key drains all the same). */
  liveKey: boolean;
}

export const DEFAULT_TOP = 50;

export function topArg(text: string | undefined): number {
  if (text === undefined || text === '') return DEFAULT_TOP;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new UsageError(`top must be 1…10000, got ${text}`);
  return n;
}

/**
 * The `top` clients by backlog (every shard read once). `readyPartitions: false` leaves them
 * uncounted (null), which reads only the front of each shard's ready partitions: O(shards ·
 * clients) whatever the backlog, for a view refreshed every few seconds (QueueAdmin.clients).
 */
export async function topClients(
  admin: QueueAdmin,
  store: KeyStore,
  top = DEFAULT_TOP,
  options: { readyPartitions?: boolean } = {},
): Promise<ClientView[]> {
  const [clients, keys] = await Promise.all([admin.clients(options), store.list()]);
  const byName = new Map(keys.map((k) => [k.name, k]));
  return clients.slice(0, top).map((c) => clientView(c, byName.get(c.client)));
}

function clientView(c: ClientInfo, key: KeyInfo | undefined): ClientView {
  const counted = c as ClientInfo & { inFlight?: number };
  const keyed = key as (KeyInfo & { maxInFlight?: number | null }) | undefined;
  return {
    client: c.client,
    backlog: c.pending,
    readyPartitions: c.readyPartitions,
    inFlight: counted.inFlight ?? null,
    weight: c.weight,
    cap: keyed?.maxInFlight ?? null,
    rate: key?.rate ?? null,
    oldestWaitMs: c.oldestReadyAgeMs,
    liveKey: key !== undefined,
  };
}
