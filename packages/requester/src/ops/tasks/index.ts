import { originOf } from '@requester/policies';
import { Outbox, type Sql, tryParseRfc3339, UsageError } from '@requester/shared';
import { isoTime } from '../index.ts';
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
    .page(
      {
        ...(filter.client === undefined ? {} : { client: filter.client === '' ? null : filter.client }),
        ...(filter.dueAfter ? { dueAfter: instant('due-after', filter.dueAfter) } : {}),
        ...(filter.dueBefore ? { dueBefore: instant('due-before', filter.dueBefore) } : {}),
      },
      limit,
      cursor || undefined,
    )
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
