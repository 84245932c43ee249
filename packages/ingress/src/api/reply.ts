/**
 * Answers that carry a result (sync calls, long-polls), and who may read one.
 *
 * @module
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { counter } from '@requester/shared/metrics';
import type { Context } from 'hono';
import type { Access } from '../auth/index.ts';
import type { Env } from './context.ts';

const syncReplies = counter('sync_replies_total', 'Sync calls and long-polls, by whether a result came', [
  'outcome',
]);

/** The namespace of the caller's requests: its key's name (`meta.client`), none with AUTH=off. */
export function callerClient(c: Context<Env>): string | undefined {
  return c.get('caller')?.name;
}

/**
 * A result only for the key that sent its request. Another key's result is answered as no result,
 * and not before `until`, when no result would have been: an early answer would tell that the
 * requestId exists.
 */
export async function readable(
  c: Context<Env>,
  access: Access,
  json: string | undefined,
  until: number,
): Promise<string | undefined> {
  if (json === undefined || access.mayRead(c.get('caller'), json)) return json;
  const ms = until - Date.now();
  if (ms > 0) await sleep(ms, undefined, { signal: c.req.raw.signal }).catch(() => {});
  return undefined;
}

/**
 * A result is answered `200` with the envelope as the body, whatever the target's status: the
 * caller asked for the envelope, and a proxy must not mistake a target's 503 for ours. No result
 * yet: a sync call gets `202` + `Location` (the task goes on), a long-poll `404 pending`.
 */
export function reply(
  c: Context<Env>,
  id: string,
  json: string | undefined,
  kind: 'sync' | 'poll',
): Response {
  syncReplies.inc({ outcome: json === undefined ? 'pending' : 'result' });
  if (json !== undefined) {
    const after = retryAfterSeconds(json);
    if (after !== undefined) c.header('Retry-After', String(after));
    return c.body(json, 200, { 'content-type': 'application/json' });
  }
  if (kind === 'poll') {
    return c.json(
      { requestId: id, status: 'pending', detail: 'no result yet; ask again with ?wait=30s' },
      404,
    );
  }
  c.header('Location', `/requests/${encodeURIComponent(id)}`);
  return c.json({ requestId: id, status: 'pending' }, 202);
}

interface ResultHead {
  response?: { status?: unknown; headers?: Record<string, unknown> };
  meta?: { waitTime?: unknown };
}

/**
 * `Retry-After` of a sync reply: the limiter's wait (`meta.waitTime`, ns, rounded up to seconds)
 * when it made the call wait, else the target's own `Retry-After` when it answered 429.
 */
export function retryAfterSeconds(json: string): number | undefined {
  let head: ResultHead;
  try {
    head = JSON.parse(json) as ResultHead;
  } catch {
    return undefined;
  }
  const waitNs = typeof head.meta?.waitTime === 'number' ? head.meta.waitTime : 0;
  if (waitNs > 0) return Math.ceil(waitNs / 1e9);
  if (head.response?.status !== 429) return undefined;
  return targetRetryAfter(head.response.headers ?? {});
}

function targetRetryAfter(headers: Record<string, unknown>): number | undefined {
  const entry = Object.entries(headers).find(([name]) => name.toLowerCase() === 'retry-after');
  const value = typeof entry?.[1] === 'string' ? entry[1].trim() : '';
  if (/^\d+$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}
