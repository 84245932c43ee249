import {
  type Config,
  eventsOfClient,
  type JournalEvent,
  lookupSince,
  readJournal,
  UsageError,
} from '@requester/shared';
import { commandKafka, commandLogger } from '../../commands/clients.ts';
import type { ConfigFrom } from '../../commands/common.ts';

/** `requester trace`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function trace(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const config = configFrom(argv);
  const all = await traceRequest(config, String(argv.requestId), String(argv.since));
  const events = argv.client === undefined ? all : eventsOfClient(all, String(argv.client));
  if (argv.json) process.stdout.write(`${JSON.stringify(events, null, 2)}\n`);
  else process.stdout.write(formatStory(events, String(argv.requestId)));
  if (events.length === 0) process.exitCode = 1;
}

export async function traceRequest(
  config: Config,
  requestId: string,
  since: string,
): Promise<JournalEvent[]> {
  const sinceMs = lookupSince(since);
  if (typeof sinceMs === 'string') throw new UsageError(`--since: ${sinceMs}`);
  const fetcher = commandKafka(config, commandLogger(config), 'trace').fetcher({
    connections: 1,
    cacheBytes: 0,
  });
  try {
    return await readJournal(fetcher, config.topicEvents, { requestId, sinceMs });
  } finally {
    await fetcher.close();
  }
}

/** The story as lines: `+12 ms  attempt 1: 503 in 4.2 ms`. */
export function formatStory(events: readonly JournalEvent[], requestId: string): string {
  const first = events[0];
  if (!first) return `no journal events for ${requestId} (EVENTS=off, older than --since, or unknown)\n`;
  const width = String(Math.max(...events.map((e) => e.at - first.at))).length;
  const lines = events.map(
    (e) => `${`+${e.at - first.at}`.padStart(width + 1)} ms  ${describe(e, first.at)}`,
  );
  return `${requestId} — ${new Date(first.at).toISOString()}\n${lines.join('\n')}\n`;
}

/** What decided when a leased task ran, as the event names it: `, priority 5, concurrency key k`. */
function leasedWhy(e: Extract<JournalEvent, { type: 'leased' }>): string {
  const parts = [
    e.priority === undefined ? '' : `, priority ${e.priority}`,
    e.concurrencyKey === undefined ? '' : `, concurrency key ${e.concurrencyKey}`,
    e.debounceKey === undefined ? '' : `, debounce key ${e.debounceKey}`,
  ];
  return parts.join('');
}

function describe(e: JournalEvent, origin: number): string {
  const rel = (ms: number) => `+${ms - origin} ms`;
  switch (e.type) {
    case 'accepted':
      return `accepted over ${e.channel}${e.client ? ` from ${e.client}` : ''}`;
    case 'routed':
      return `routed to ${e.to}, due ${e.due <= e.at ? 'now' : `at ${rel(e.due)}`}`;
    case 'relayed':
      return 'relayed from the outbox back to in';
    case 'leased':
      return `leased by ${e.executor} (attempts so far: ${e.tryCount}${leasedWhy(e)})`;
    case 'held':
      if (e.by === 'hold') return `held: its origin is held back, next probe at ${rel(e.until)}`;
      return `held by the ${e.by} until ${rel(e.until)}${e.pausedBy ? ` (paused by ${e.pausedBy})` : ''}`;
    case 'throttled':
      return `the target asked to ${e.signal === 'slow' ? 'slow down' : 'be spared (overloaded)'}: origin limited to ${e.limit} in flight${e.rate ? `, ${Math.round(e.rate * 10) / 10} calls/s` : ''}${e.holdMs ? `, held ${e.holdMs} ms` : ''}`;
    case 'attempt':
      return `attempt ${e.n}${e.probe ? ' (probe of a held origin)' : ''}: ${e.status ?? e.error ?? '?'} in ${e.durationMs} ms`;
    case 'origin_failing':
      return `${e.origin} held back (${e.reason === 'opt_out' ? 'the receiver opted out' : `failing since ${new Date(e.failingSince ?? e.since).toISOString()}, ${e.failures} failures`})`;
    case 'origin_recovered':
      return `${e.origin} recovered after a hold since ${new Date(e.since).toISOString()} (${e.failures} failures)`;
    case 'retry_scheduled':
      return `retry scheduled in ${e.delayMs} ms (${e.where})`;
    case 'cache':
      return e.outcome === 'hit' ? 'answered from the cache' : 'coalesced with a call in flight';
    case 'completed':
      return `completed: ${e.status}${e.error ? ` ${e.error}` : ''} after ${e.tryCount} attempt(s)`;
    case 'dead_lettered':
      return `dead-lettered (${e.reason})`;
    case 'replayed':
      return `replayed by ${e.by}${e.dlq ? ` from ${e.dlq}` : ''}`;
    case 'cancelled':
      return `cancelled by ${e.by}`;
    case 'debounced':
      return `debounced: replaced by ${e.by}, a newer request of key ${e.key}`;
    case 'expired':
      return `expired: deadline ${new Date(e.deadline).toISOString()} passed (${e.stage === 'queued' ? 'before its turn' : `before its next ${e.stage === 'retry' ? 'attempt' : 'start'}`}), after ${e.tryCount} attempt(s)`;
    case 'admin_action':
      return `${e.action}${e.version === undefined ? '' : ` (version ${e.version})`} by ${e.actor}${e.outcome === 'failed' ? ' (failed)' : ''}`;
  }
}
