import { originOf } from '@requester/policies';
import {
  Cancellations,
  type Config,
  cancelRequest,
  type Journal,
  type Logger,
  Outbox,
  type RedisClient,
  type Sql,
  tryParseRfc3339,
  UsageError,
  type WaitingFilter,
} from '@requester/shared';
import { type AdminActionEvent, recordAdminAction } from '../audit.ts';
import { isoTime } from '../format.ts';
import { redactUrl } from '../redact.ts';

/**
 * Lists by state (issue 22), so far the **scheduled** state: the requests waiting in the
 * PostgreSQL outbox (scheduled beyond REDIS_HORIZON, or an unordered retry's long wait), with their
 * due time, filtered by client and due window, one page at a time (keyset on due time, never the
 * whole table). Behind `requester tasks scheduled`, `GET /admin/api/tasks/scheduled` and the Tasks
 * page. URLs are redacted (../redact.ts) as in every view of requests.
 */
export interface ScheduledFilter {
  /** The API key name; '' = requests without a client; absent = every client. */
  client?: string;
  dueAfter?: string;
  dueBefore?: string;
}

export interface ScheduledRow {
  requestId: string;
  client: string | null;
  taskId: string;
  dueAt: string | null;
  addedAt: string | null;
  origin: string | null;
  uri: string | null;
  partition: string | null;
}

export async function scheduledPage(
  sql: Sql,
  filter: ScheduledFilter,
  limit: number,
  cursor?: string,
): Promise<{ rows: ScheduledRow[]; next: string | null }> {
  if (!Number.isInteger(limit) || limit < 1 || limit > 1_000)
    throw new UsageError(`limit must be 1…1000, got ${limit}`);
  const page = await new Outbox(sql)
    .page(waitingFilter(filter), limit, cursor || undefined)
    .catch((err: unknown) => {
      if (err instanceof RangeError) throw new UsageError(`cursor: ${err.message}`);
      throw err;
    });
  return {
    next: page.next,
    rows: page.rows.map((r) => ({
      requestId: r.requestId,
      client: r.client,
      taskId: r.taskId,
      dueAt: isoTime(r.dueAt),
      addedAt: isoTime(r.addedAt),
      origin: safeOrigin(r.uri),
      uri: r.uri === null ? null : redactUrl(r.uri),
      partition: r.partition,
    })),
  };
}

function waitingFilter(filter: ScheduledFilter): WaitingFilter {
  return {
    ...(filter.client === undefined ? {} : { client: filter.client === '' ? null : filter.client }),
    ...(filter.dueAfter ? { dueAfter: instant('due-after', filter.dueAfter) } : {}),
    ...(filter.dueBefore ? { dueBefore: instant('due-before', filter.dueBefore) } : {}),
  };
}

/**
 * Cancels every scheduled request a filter selects (each as `requester cancel` does). Without
 * `confirm` it only counts them: the preview. It walks the selection a page at a time (memory
 * bounded by the page), and is resumable: a cancel is idempotent and a cancelled row leaves the
 * outbox, so running it again after a crash takes what is left. A filter is required (no "all").
 */
export async function cancelScheduled(
  parts: {
    sql: Sql;
    redis: RedisClient;
    config: Pick<Config, 'redisPrefix' | 'cancelRetention'>;
    logger: Logger;
    journal?: Journal;
    journalAdminAction?: (event: AdminActionEvent) => Promise<void>;
  },
  actor: string,
  filter: ScheduledFilter,
  confirm: boolean,
  onProgress?: (done: number, total: number) => void,
): Promise<{ matched: number; cancelled: number; preview: boolean }> {
  if (filter.client === undefined && !filter.dueAfter && !filter.dueBefore)
    throw new UsageError('cancelling scheduled requests needs a selection: client, due-after or due-before');
  const selection = waitingFilter(filter);
  const outbox = new Outbox(parts.sql);
  const matched = await outbox.countMatching(selection);
  if (!confirm) return { matched, cancelled: 0, preview: true };
  const cancellations = new Cancellations(
    parts.redis,
    parts.config.redisPrefix,
    parts.config.cancelRetention,
  );
  const where = {
    cancellations,
    outbox: async () => outbox,
    ...(parts.journal ? { journal: parts.journal } : {}),
  };
  const requestIds: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await outbox.page(selection, 200, cursor);
    await Promise.all(
      page.rows.map((row) => cancelRequest(where, row.client ?? undefined, row.requestId, actor)),
    );
    requestIds.push(...page.rows.map((r) => r.requestId));
    onProgress?.(requestIds.length, matched);
    if (!page.next) break;
    cursor = page.next;
  }
  await recordAdminAction(
    parts.logger,
    { action: 'tasks.cancel', actor, target: { selection: filter, requestIds }, outcome: 'done' },
    parts.journalAdminAction,
  );
  return { matched, cancelled: requestIds.length, preview: false };
}

function instant(name: string, text: string): number {
  const parsed = tryParseRfc3339(text);
  if (!parsed.ok) throw new UsageError(`--${name}: ${parsed.message}`);
  return parsed.epochMs;
}

function safeOrigin(uri: string | null): string | null {
  if (!uri) return null;
  try {
    return originOf(uri);
  } catch {
    return null;
  }
}
