import { setTimeout as sleep } from 'node:timers/promises';
import { clientScoped } from '@requester/shared/contract';
import { tryParseDuration } from '@requester/shared/time';
import type { Context } from 'hono';
import type { Hub } from '../../hub/index.ts';
import type { Env } from '../context.ts';
import { useLog } from '../log/index.ts';
import { notServed, overShare, problem, refuse } from '../problem.ts';
import { callerClient, readable, reply } from '../reply.ts';
import type { ApiParts, ApiSettings, Fairness } from '../settings.ts';

/** `GET /requests/{id}?wait=30s` (sync-gateway): the result from the Hub, or `404 pending`. */
export async function getResult(
  c: Context<Env>,
  parts: ApiParts,
  settings: ApiSettings,
  fair: Fairness,
): Promise<Response> {
  const hub = parts.hub;
  if (!hub) return notServed(c, 'GET /requests/{id}', 'sync-gateway');
  const id = c.req.param('id') ?? '';
  useLog(c, parts.gatewayLog, id);
  const wait = waitMs(c.req.query('wait'), settings.longPollMaxMs);
  if (typeof wait === 'string')
    return problem(c, 400, 'invalid_request', `wait: ${wait}`, [{ path: 'wait', message: wait }]);
  // The caller's own request of that id: another key's is another result, never looked at.
  const resultId = clientScoped(callerClient(c), id);
  const mayNotWait = wait > 0 ? settings.access.mayNotWait(c.get('caller')) : undefined;
  if (mayNotWait) return refuse(c, mayNotWait);
  if (wait > 0 && hub.crowded() && hub.peek(resultId) === undefined) {
    c.header('Retry-After', '1');
    return problem(c, 503, 'overloaded', 'too many callers are waiting on this sync-gateway; retry later');
  }
  // Every wait counts, another key's result included (it is answered only when `wait` ends).
  const slot = wait > 0 ? fair.waits.enter(c.get('caller')?.keyId) : undefined;
  if (wait > 0 && !slot)
    return overShare(
      c,
      `this API key already has ${fair.waits.max} callers waiting on this sync-gateway (SYNC_MAX_WAITERS_PER_KEY); retry later`,
    );
  try {
    const timeoutMs = parts.closing ? 0 : wait;
    const until = Date.now() + timeoutMs;
    const json = await (parts.lookup
      ? lookOut(hub, parts.lookup, resultId, until, c.req.raw.signal)
      : hub.wait(resultId, { timeoutMs, signal: c.req.raw.signal }));
    return reply(c, id, await readable(c, settings.access, json, until), 'poll');
  } finally {
    slot?.leave();
  }
}

/** How often a waiting long-poll re-reads the result kept in Redis (SYNC_FOLLOW_OUT=false). */
const LOOKUP_INTERVAL_MS = 1_000;

/**
 * A long-poll when this gateway does not follow `out`: the result passed here (a sync call of its
 * own), or was kept in Redis by the executor (a sync call taken by any gateway), else it is waited
 * for on the Hub and looked up again every LOOKUP_INTERVAL_MS until `until`.
 */
async function lookOut(
  hub: Hub<string>,
  lookup: (resultId: string) => Promise<string | undefined>,
  id: string,
  until: number,
  signal: AbortSignal,
): Promise<string | undefined> {
  for (;;) {
    const json = hub.peek(id) ?? (await lookup(id));
    const left = until - Date.now();
    if (json !== undefined || left <= 0 || signal.aborted) return json;
    const timeoutMs = Math.min(left, LOOKUP_INTERVAL_MS);
    // A crowded Hub answers at once: pause instead, or this loop would hammer Redis.
    const woken = hub.crowded()
      ? await sleep(timeoutMs, undefined, { signal }).catch(() => undefined)
      : await hub.wait(id, { timeoutMs, signal });
    if (woken !== undefined) return woken;
  }
}

/** `?wait=` as milliseconds, capped; a string says why it was refused. Absent = do not wait. */
function waitMs(text: string | undefined, capMs: number): number | string {
  if (text === undefined || text === '') return 0;
  const parsed = tryParseDuration(text);
  if (!parsed.ok) return parsed.message;
  if (parsed.ns < 0n) return `must not be negative (got ${text})`;
  return Math.min(Number(parsed.ns / 1_000_000n), capMs);
}
