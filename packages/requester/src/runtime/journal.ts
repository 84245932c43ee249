import {
  type Config,
  DESTINATION_NAME_PATTERN,
  type Dependencies,
  destinationSubject,
  type Fetcher,
  type Journal,
  readJournal,
} from '@requester/shared';
import type { AdminConsoleOptions } from '../admin-server/console.ts';
import type { AdminActionEvent } from '../ops/audit.ts';

export type JournalHooks = Pick<AdminConsoleOptions, 'events' | 'journalAdminAction'>;

/**
 * The operator UI's view of the task journal in this process: the request page's timeline reads
 * KAFKA_TOPIC_EVENTS (a fetcher of its own, opened on first use), and every operator action on
 * requests becomes an `admin_action` event of each request it named, with its actor, and every change
 * of a destination one under the destination's own subject (destinationSubject). With
 * EVENTS=off there is neither ("journal not enabled").
 */
export function journalHooks(
  config: Config,
  deps: Dependencies,
): { hooks: JournalHooks; close(): Promise<void> } {
  if (config.events === 'off') return { hooks: {}, close: async () => {} };
  let fetcher: Fetcher | undefined;
  const hooks: JournalHooks = {
    events: (requestId, sinceMs) => {
      fetcher ??= deps.kafka().fetcher({ connections: 1, cacheBytes: 0 });
      return readJournal(fetcher, config.topicEvents, {
        requestId,
        ...(sinceMs === undefined ? {} : { sinceMs }),
      });
    },
    journalAdminAction: async (event) => journalAdminAction(deps.journal(), event),
  };
  return { hooks, close: async () => fetcher?.close() };
}

/**
 * The journal's events of an operator action: an `admin_action` of each request it named and, when
 * it changed a destination, one under the destination's subject.
 */
export function journalAdminAction(journal: Journal, event: AdminActionEvent): void {
  const at = Date.parse(event.at);
  for (const requestId of requestIdsOf(event.target))
    journal.emit({
      type: 'admin_action',
      requestId,
      action: event.action,
      actor: event.actor,
      outcome: event.outcome,
      ...(Number.isNaN(at) ? {} : { at }),
    });
  const destination = destinationOf(event.target);
  if (destination !== undefined) {
    // Only the names and the version: a destination's spec may hold secret header values.
    const version = event.target.version;
    journal.emit({
      type: 'admin_action',
      requestId: destinationSubject(destination),
      action: event.action,
      actor: event.actor,
      outcome: event.outcome,
      destination,
      ...(typeof version === 'number' && Number.isSafeInteger(version) && version > 0 ? { version } : {}),
      ...(Number.isNaN(at) ? {} : { at }),
    });
  }
}

/**
 * The destination an action changed: `target.destination`, or the value of a destination-scope
 * pause. A name no destination could have (a refused create's) gets no journal subject.
 */
function destinationOf(target: Record<string, unknown>): string | undefined {
  const name = target.scope === 'destination' ? target.value : target.destination;
  return typeof name === 'string' && DESTINATION_NAME_PATTERN.test(name) ? name : undefined;
}

/** The requests an action names (`target.requestIds`); actions on origins or keys name none. */
function requestIdsOf(target: Record<string, unknown>): string[] {
  const ids = target.requestIds;
  return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string' && id !== '') : [];
}
