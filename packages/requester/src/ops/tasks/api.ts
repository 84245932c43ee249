import { UsageError } from '@requester/shared';
import { html } from 'hono/html';
import { type AdminContext, answer, type Body, bodyOf, stringOf } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import {
  CANCELLABLE_STATES,
  type CancellableState,
  TASK_STATES,
  type TaskFilter,
  type TaskState,
} from './index.ts';

const FILTER_KEYS = ['client', 'origin', 'partition', 'dueAfter', 'dueBefore', 'olderThan'] as const;

/** The filter of a query or a body: `client` may be blank (requests without a client), the rest not. */
export function filterOf(source: Body): TaskFilter {
  const filter: TaskFilter = {};
  for (const key of FILTER_KEYS) {
    const value = stringOf(source[key]);
    if (value === undefined) continue;
    if (key === 'client') filter.client = value.trim();
    else if (value.trim()) filter[key] = value.trim();
  }
  return filter;
}

/** The filter and page of `?client=&origin=&partition=&dueAfter=&dueBefore=&olderThan=&limit=&cursor=`. */
export function listQuery(c: AdminContext): { filter: TaskFilter; limit: number; cursor?: string } {
  const q = c.req.query();
  const limit = q.limit ? Number(q.limit) : 50;
  return { filter: filterOf(q), limit, ...(q.cursor ? { cursor: q.cursor } : {}) };
}

export function stateOf(text: string | undefined): TaskState {
  if (TASK_STATES.includes(text as TaskState)) return text as TaskState;
  throw new UsageError(`not a task state: ${JSON.stringify(text)} (${TASK_STATES.join(', ')})`);
}

function cancellable(state: TaskState): CancellableState {
  if (CANCELLABLE_STATES.includes(state as CancellableState)) return state as CancellableState;
  throw new UsageError(`cancel takes ${CANCELLABLE_STATES.join(', ')} tasks, not ${state}`);
}

const STATE_SUMMARY: Record<TaskState, string> = {
  pending: 'Tasks due now, waiting in Redis for their turn (requester tasks pending)',
  scheduled:
    'Tasks due later: those in Redis (timers inside REDIS_HORIZON, backoffs, waits), then the outbox rows, with their due time (requester tasks scheduled)',
  'in-flight':
    'Tasks leased by an executor, with their lease expiry and deliveries (requester tasks in-flight)',
  dead: "The queue's dead tasks (requester tasks dead; dead-lettered requests: /admin/api/dlq)",
};

const LIST_PARAMS = [...FILTER_KEYS, 'limit', 'cursor'];

const PAGING =
  ', one page at a time: {rows, next}; pass next as cursor for the following page (null: done; a filtered page may be short). client: the API key name, blank for none; dueAfter/dueBefore: the state’s time (due, lease expiry, dead time); olderThan: a duration (queued longer ago)';

const CANCEL_BODY: Record<string, unknown> = {
  client: { type: 'string' },
  origin: { type: 'string' },
  partition: { type: 'string' },
  dueAfter: { type: 'string' },
  dueBefore: { type: 'string' },
  olderThan: { type: 'string' },
  confirm: { type: 'boolean' },
};

const cancelPath = (state: CancellableState) => ({
  get: undefined,
  post: {
    summary: `Cancel every ${state} task a selection matches (one filter at least): without confirm: true, the preview {matched, preview: true}; with it, {matched, cancelled, already}. Walks the selection by pages; resumable (run it again: cancels are idempotent)`,
    write: true,
    body: CANCEL_BODY,
  },
});

/**
 * `GET /admin/api/tasks/{state}` (read key): one page of a state's tasks.
 * `POST /admin/api/tasks/{state}/cancel` (write key; pending, scheduled, in-flight): without
 * `confirm: true` the preview `{matched}`, with it the cancel of every match (ops/tasks
 * cancelMatching, recorded as `tasks.cancel`).
 */
export const api: ApiFace = {
  paths: {
    ...Object.fromEntries(
      TASK_STATES.map((state) => [
        `/admin/api/tasks/${state}`,
        { get: { summary: `${STATE_SUMMARY[state]}${PAGING}`, params: LIST_PARAMS }, post: undefined },
      ]),
    ),
    ...Object.fromEntries(
      CANCELLABLE_STATES.map((state) => [`/admin/api/tasks/${state}/cancel`, cancelPath(state)]),
    ),
  },
  routes(app, console) {
    app.get('/admin/api/tasks/:state', async (c) => {
      const { filter, limit, cursor } = listQuery(c);
      return c.json(await console.tasks(stateOf(c.req.param('state')), filter, limit, cursor));
    });
    app.post('/admin/api/tasks/:state/cancel', async (c) => {
      const state = cancellable(stateOf(c.req.param('state')));
      const body = await bodyOf(c);
      const confirm = body.confirm === true || body.confirm === 'true';
      const filter = filterOf(body);
      const outcome = await console.cancelTasks(c.get('operator'), state, filter, confirm);
      // The UI's confirm step: the preview's answer holds the button that acts.
      if (outcome.preview && c.req.header('hx-request'))
        return c.html(
          html`<div class="flash" data-preview="${outcome.matched}">${outcome.matched} ${state} tasks match. ${
            outcome.matched > 0
              ? html`<button hx-post="/admin/api/tasks/${state}/cancel" hx-vals='${JSON.stringify({ ...filter, confirm: true })}' hx-target="#flash" class="danger" data-action="confirm-cancel">Cancel these ${outcome.matched}</button>`
              : ''
          }</div>`,
        );
      return answer(
        c,
        outcome,
        outcome.preview
          ? `${outcome.matched} ${state} tasks match.`
          : `Cancelled ${outcome.cancelled} ${state} tasks (${outcome.already} were cancelled already): their results (cancelled) follow on out.`,
      );
    });
  },
};
