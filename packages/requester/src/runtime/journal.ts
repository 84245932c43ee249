import { type Config, type Dependencies, type Fetcher, readJournal } from '@requester/shared';
import type { AdminConsoleOptions } from '../admin-server/console.ts';
import type { AdminActionEvent } from '../ops/audit.ts';

export type JournalHooks = Pick<AdminConsoleOptions, 'events' | 'journalAdminAction'>;

/**
 * The operator UI's view of the task journal in this process: the request page's timeline reads
 * KAFKA_TOPIC_EVENTS (a fetcher of its own, opened on first use), and every operator action on
 * requests becomes an `admin_action` event of each request it named, with its actor. With
 * EVENTS=off there is neither ("journal not enabled").
 */
export function journalHooks(
  config: Config,
  deps: Dependencies,
): { hooks: JournalHooks; close(): Promise<void> } {
  if (config.events === 'off') return { hooks: {}, close: async () => {} };
  let fetcher: Fetcher | undefined;
  const hooks: JournalHooks = {
    events: (requestId) => {
      fetcher ??= deps.kafka().fetcher({ connections: 1, cacheBytes: 0 });
      return readJournal(fetcher, config.topicEvents, { requestId });
    },
    journalAdminAction: async (event) => journalAdminAction(deps, event),
  };
  return { hooks, close: async () => fetcher?.close() };
}

function journalAdminAction(deps: Dependencies, event: AdminActionEvent): void {
  const journal = deps.journal();
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
}

/** The requests an action names (`target.requestIds`); actions on origins or keys name none. */
function requestIdsOf(target: Record<string, unknown>): string[] {
  const ids = target.requestIds;
  return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string' && id !== '') : [];
}
