import { type CircuitBreaker, originOf } from '@requester/policies';
import type { PartitionView, QueueAdmin } from '@requester/queue';
import { decodeQueuedTask, type Fetcher, type KafkaRef } from '@requester/shared';
import { isoTime } from '../format.ts';
import { redactQueuedPayload } from '../redact.ts';

/**
 * The Redis fair queue as an operator sees it: its partitions, each held-back head explained
 * (the admin API and the UI's Partitions page); `requester queue …` (./cli.ts) reads the rest
 * through the queue's own `QueueAdmin`.
 */

export interface PartitionRow extends PartitionView {
  /** Why its head waits, as far as can be told (see `whyWaiting`). */
  why: string;
  /** The head task's request, when its `in` record could be read. */
  requestId: string | null;
  origin: string | null;
  tryCount: number | null;
  waitedMs: number | null;
}

/**
 * The heaviest partitions (most pending) and the most held back (waiting or blocked, longest wait
 * first), `limit` of each, each head explained. The queue does not keep why a task was put back,
 * so the reason is inferred from what is known now: the head's progress (its try count, time
 * waited for limits), its request's origin (an open breaker) and limiter key.
 */
export async function partitionsOverview(
  admin: QueueAdmin,
  limit: number,
  context: { breaker?: CircuitBreaker; inRecords?: Pick<Fetcher, 'fetchMany'>; reveal?: boolean },
): Promise<{ heaviest: PartitionRow[]; held: PartitionRow[]; at: string | null }> {
  const { partitions, nowMs } = await admin.partitions(limit);
  const heaviest = partitions.filter((p) => p.pending > 0).slice(0, limit);
  const held = partitions
    .filter((p) => p.state === 'waiting' || p.state === 'blocked')
    .sort((a, b) => (a.head?.publishedAt ?? nowMs) - (b.head?.publishedAt ?? nowMs))
    .slice(0, limit);
  const unique = [...new Map([...heaviest, ...held].map((p) => [p.partition, p])).values()];
  const explained = new Map(
    (await explainHeads(unique, nowMs, context)).map((row) => [row.partition, row] as const),
  );
  const pick = (p: PartitionView) => explained.get(p.partition) as PartitionRow;
  return { heaviest: heaviest.map(pick), held: held.map(pick), at: isoTime(nowMs) };
}

interface HeadRequest {
  requestId: string;
  origin?: string;
  limiterKey?: string;
}

async function explainHeads(
  views: PartitionView[],
  nowMs: number,
  context: { breaker?: CircuitBreaker; inRecords?: Pick<Fetcher, 'fetchMany'>; reveal?: boolean },
): Promise<PartitionRow[]> {
  const tasks = views.map((v) => (v.head ? safeDecode(v.head.payload) : undefined));
  const refs = tasks.map((t) => t?.ref);
  const requests = await readRequests(refs, context.inRecords);
  const openOrigins = new Map(
    ((await context.breaker?.openOrigins(1_000).catch(() => [])) ?? []).map((o) => [o.origin, o] as const),
  );
  return views.map((view, i) => {
    const task = tasks[i];
    const request = requests[i];
    return {
      ...view,
      head:
        view.head && !context.reveal
          ? { ...view.head, payload: redactQueuedPayload(view.head.payload) }
          : view.head,
      requestId: request?.requestId ?? task?.requestId ?? null,
      origin: request?.origin ?? null,
      tryCount: task?.tryCount ?? null,
      waitedMs: task?.waitedMs ?? null,
      why: whyWaiting(view, nowMs, task, request, openOrigins),
    };
  });
}

/** The best explanation of why a partition's head is not running now. */
export function whyWaiting(
  view: PartitionView,
  nowMs: number,
  task: { tryCount: number; waitedMs?: number } | undefined,
  request: HeadRequest | undefined,
  openOrigins: ReadonlyMap<string, { retryAtMs: number }>,
): string {
  if (view.state === 'ready') return 'ready: its turn in the round-robin comes';
  if (view.state === 'idle') return 'idle: nothing pending';
  if (view.state === 'blocked')
    return view.partition.startsWith('!')
      ? 'bulkhead: ordered, its previous task is in flight (one at a time)'
      : 'bulkhead: its in-flight limit (QUEUE_PARTITION_CONCURRENCY) is reached';
  const until =
    view.wakeAt === null ? '' : ` (due in ${Math.max(0, Math.round((view.wakeAt - nowMs) / 1000))} s)`;
  const open = request?.origin ? openOrigins.get(request.origin) : undefined;
  if (open) return `breaker: ${request?.origin} is open${until}`;
  if ((view.head?.deliveries ?? 0) === 0) return `schedule: not due yet${until}`;
  if ((task?.waitedMs ?? 0) > 0 && request?.limiterKey) return `limiter: key ${request.limiterKey}${until}`;
  if ((task?.waitedMs ?? 0) > 0) return `limiter or breaker wait${until}`;
  if ((task?.tryCount ?? 0) > 0) return `retry: backoff before try ${(task?.tryCount ?? 0) + 1}${until}`;
  if (view.partition.startsWith('!')) return `ordered: held after a reject${until}`;
  return `waiting${until}`;
}

function safeDecode(payload: string) {
  try {
    return decodeQueuedTask(payload);
  } catch {
    return undefined;
  }
}

/** The requests behind the heads, read from `in` by offset (never throws: unread ones are undefined). */
async function readRequests(
  refs: ReadonlyArray<KafkaRef | undefined>,
  reader: Pick<Fetcher, 'fetchMany'> | undefined,
): Promise<Array<HeadRequest | undefined>> {
  const wanted = refs.flatMap((ref, i) => (ref ? [{ ref, i }] : []));
  const out: Array<HeadRequest | undefined> = refs.map(() => undefined);
  if (!reader || wanted.length === 0) return out;
  const outcomes = await reader.fetchMany(wanted.map((w) => w.ref)).catch(() => []);
  wanted.forEach(({ i }, j) => {
    const outcome = outcomes[j];
    if (!outcome?.ok) return;
    try {
      const envelope = JSON.parse(String(outcome.record.value)) as {
        request?: { uri?: string };
        meta?: { requestId?: string; limiter?: { key?: string } };
      };
      const uri = envelope.request?.uri;
      out[i] = {
        requestId: envelope.meta?.requestId ?? '',
        ...(uri ? { origin: safeOrigin(uri) } : {}),
        ...(envelope.meta?.limiter?.key ? { limiterKey: envelope.meta.limiter.key } : {}),
      };
    } catch {
      // an unreadable record: no explanation from its request
    }
  });
  return out;
}

function safeOrigin(uri: string): string | undefined {
  try {
    return originOf(uri);
  } catch {
    return undefined;
  }
}
