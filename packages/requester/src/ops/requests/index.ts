import type { AdminConsole, JournalEvent } from '../../admin-server/console.ts';
import { mayReveal, type Operator } from '../../admin-server/operator.ts';
import { deadLetterViews } from '../dlq/api.ts';
import { redactResult } from '../redact.ts';

/**
 * What is known of one request (the admin API's `/admin/api/requests/{id}`, the UI's request
 * lookup): its result here, its dead letters, its journal. A requestId is its client's: the
 * result is the one of `client`'s request (none: a request without a client); dead letters are
 * those of every client unless `client` is given. Secrets hidden unless `revealTo` (a write
 * operator) asks, which is recorded. The CLI's view of a request is its journal: `requester
 * trace` (ops/trace).
 */
export async function lookupRequest(
  console: AdminConsole,
  requestId: string,
  client?: string,
  revealTo?: Operator,
) {
  const reveal = mayReveal(revealTo);
  const result = console.peekResult?.(requestId, client);
  const dead = await deadLetterViews(
    console,
    { requestIds: [requestId], ...(client ? { client } : {}) },
    20,
    reveal,
  );
  const parsed = result === undefined ? null : (JSON.parse(result) as unknown);
  if (revealTo) await console.reveal(revealTo, 'request', [requestId]);
  return {
    requestId,
    client: client ?? null,
    result: reveal ? parsed : redactResult(parsed),
    resultSource: console.peekResult ? 'sync-gateway' : null,
    deadLetters: dead.entries,
  };
}

/** Its journal, as this process reads it (AdminConsoleOptions.events); `enabled` false without one. */
export async function requestEvents(
  console: AdminConsole,
  requestId: string,
): Promise<{ enabled: boolean; events: JournalEvent[] }> {
  if (!console.events) return { enabled: false, events: [] };
  return { enabled: true, events: await console.events(requestId) };
}
