import { RequesterError } from '../errors/index.ts';
import type { FetchedRecord, Fetcher } from '../kafka/types.ts';
import { tryParseDuration } from '../time/duration.ts';
import { tryParseRfc3339 } from '../time/rfc3339.ts';
import { type JournalEvent, journalEventSchema } from './event.ts';

/** How far back a lookup reads when the caller does not say (the events of the last hour). */
const DEFAULT_LOOKBACK_MS = 3_600_000;

export interface JournalLookup {
  requestId: string;
  /** Read the events written at or after this time (epoch ms); default: an hour ago. */
  sinceMs?: number;
}

/**
 * The story of one request: its events from KAFKA_TOPIC_EVENTS, in the order they happened. One
 * partition is read from `sinceMs` on (Fetcher.readKey); events are ordered by `at`, then by
 * offset — the processes' clocks differ a little, and one process's events keep their order.
 * Records that are not journal events (or of a type this version does not know) are skipped.
 */
export async function readJournal(
  fetcher: Pick<Fetcher, 'readKey'>,
  topic: string,
  lookup: JournalLookup,
  now = Date.now(),
): Promise<JournalEvent[]> {
  const since = lookup.sinceMs ?? now - DEFAULT_LOOKBACK_MS;
  let records: FetchedRecord[];
  try {
    records = await fetcher.readKey(topic, lookup.requestId, since);
  } catch (err) {
    if (err instanceof RequesterError && err.code === 'not_found') return []; // no journal topic yet
    throw err;
  }
  const events: JournalEvent[] = [];
  for (const record of records)
    for (const event of parseEvents(record.value))
      if (event.requestId === lookup.requestId) events.push(event);
  // Stable (as Array.prototype.sort is): events of one millisecond keep the order they were read in.
  return events.sort((a, b) => a.at - b.at);
}

/** A record's value: a JSON array of events (see writer.ts); unknown or broken ones are skipped. */
function parseEvents(value: Buffer | null): JournalEvent[] {
  let items: unknown;
  try {
    items = JSON.parse(value?.toString('utf8') ?? '');
  } catch {
    return [];
  }
  if (!Array.isArray(items)) return [];
  return items.flatMap((item) => {
    const parsed = journalEventSchema.safeParse(item);
    return parsed.success ? [parsed.data] : [];
  });
}

/**
 * The events of one client's request among those of a requestId: requestIds are per client (the
 * client namespace, docs/architecture.md §10), so two clients' stories may share a requestId and
 * a Kafka key. Every hop that knows the request's `meta.client` writes it on its events; `client`
 * undefined selects the events without one (requests written to Kafka without `meta.client`).
 */
export function eventsOfClient(events: readonly JournalEvent[], client: string | undefined): JournalEvent[] {
  return events.filter((event) => event.client === client);
}

/**
 * Where a lookup starts, from what an operator writes: a duration back from now (`2h`, `90m`) or
 * an RFC 3339 time. A string says why the text was refused.
 */
export function lookupSince(text: string, now = Date.now()): number | string {
  const duration = tryParseDuration(text);
  if (duration.ok) {
    if (duration.ns < 0n) return `must not be negative (got ${text})`;
    return now - Number(duration.ns / 1_000_000n);
  }
  const time = tryParseRfc3339(text);
  if (time.ok) return time.epochMs;
  return `expected a duration back from now (e.g. 2h) or an RFC 3339 time, got ${JSON.stringify(text)}`;
}
