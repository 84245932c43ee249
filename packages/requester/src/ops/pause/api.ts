import type { Context } from 'hono';
import type { Operator } from '../../admin-server/console.ts';
import { flash } from '../../ui/pages.ts';
import { type PauseRow, type PauseTarget, untilArg } from './index.ts';

/** What the admin API's pause routes need of the console (its Redis, its journal hook). */
export interface PauseActs {
  pauses(): Promise<PauseRow[]>;
  pause(operator: Operator, target: PauseTarget, until: number | null): Promise<PauseRow>;
  resume(
    operator: Operator,
    target: PauseTarget,
  ): Promise<{ resumed: boolean; scope: string; value: string }>;
}

async function bodyOf(c: Context): Promise<Record<string, string | undefined>> {
  const raw = (c.req.header('content-type') ?? '').startsWith('application/json')
    ? (((await c.req.json().catch(() => ({}))) ?? {}) as Record<string, unknown>)
    : ((await c.req.parseBody()) as Record<string, unknown>);
  const text = (v: unknown) => (typeof v === 'string' && v.trim() ? v.trim() : undefined);
  return { scope: text(raw.scope), value: text(raw.value), client: text(raw.client), until: text(raw.until) };
}

/** `POST /admin/api/pauses` `{scope, value, client?, until?}` (write key). */
export async function pauseFromApi(c: Context, operator: Operator, acts: PauseActs): Promise<Response> {
  const body = await bodyOf(c);
  const row = await acts.pause(
    operator,
    { scope: body.scope ?? '', value: body.value ?? '', client: body.client },
    untilArg(body.until),
  );
  if (!c.req.header('hx-request')) return c.json(row);
  c.header('HX-Trigger', 'refresh');
  return c.html(
    flash(`Paused ${row.scope} ${row.value}${row.until ? ` until ${row.until}` : ' until resumed'}.`),
  ) as unknown as Response;
}

/** `POST /admin/api/pauses/resume` `{scope, value, client?}` (write key). */
export async function resumeFromApi(c: Context, operator: Operator, acts: PauseActs): Promise<Response> {
  const body = await bodyOf(c);
  const result = await acts.resume(operator, {
    scope: body.scope ?? '',
    value: body.value ?? '',
    client: body.client,
  });
  if (!c.req.header('hx-request')) return c.json(result);
  c.header('HX-Trigger', 'refresh');
  return c.html(
    flash(result.resumed ? `Resumed ${result.scope} ${result.value}.` : `${result.value} was not paused.`),
  ) as unknown as Response;
}

/** Their entries in the admin API's OpenAPI document (../../admin-server/openapi.ts). */
export const PAUSE_OPERATIONS = {
  '/admin/api/pauses': {
    get: { summary: 'The pauses in force: scope, value, by, since, until (requester pauses)' },
    post: {
      summary:
        'Pause the work of an origin, a client or a partition (requester pause): every executor honours it from its next lease, a resume within a second; paused tasks stay queued in order, unattempted. until: RFC 3339 or a duration (2h); client: whose partition',
      write: true,
      body: {
        scope: { type: 'string', enum: ['origin', 'client', 'partition'] },
        value: { type: 'string' },
        client: { type: 'string' },
        until: { type: 'string' },
      },
    },
  },
  '/admin/api/pauses/resume': {
    get: undefined,
    post: {
      summary: 'Resume a paused origin, client or partition (requester resume)',
      write: true,
      body: {
        scope: { type: 'string', enum: ['origin', 'client', 'partition'] },
        value: { type: 'string' },
        client: { type: 'string' },
      },
    },
  },
};
