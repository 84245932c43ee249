import { html } from 'hono/html';
import { messageOf, page } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import type { Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { listQuery, stateOf } from './api.ts';
import {
  CANCELLABLE_STATES,
  type CancellableState,
  concurrencyText,
  TASK_STATES,
  type TaskFilter,
  type TaskPage,
  type TaskState,
} from './index.ts';

/**
 * The Tasks page: a tab per state (`?state=`, scheduled by default), a filter form, one page of
 * rows and a link to the next; for a write key with a selection, in a cancellable state, the
 * "Cancel matching…" button: its first step is the preview ("N tasks match", nothing done), whose
 * answer holds the button that acts (the confirm step).
 */
export const ui: UiFace = {
  nav: ['/ui/tasks', 'Tasks'],
  routes(app, console) {
    app.get('/ui/tasks', async (c) => {
      const state = stateOf(c.req.query('state') || 'scheduled');
      const { filter, limit, cursor } = listQuery(c);
      const rows = await console.tasks(state, filter, limit, cursor).catch(messageOf);
      return page(c, 'Tasks', tasksBody(c.get('operator'), state, filter, rows));
    });
  },
};

const COLUMNS: Record<TaskState, Array<[string, (r: TaskPage['rows'][number]) => unknown]>> = {
  pending: [
    ['due', (r) => r.dueAt],
    ['queued', (r) => r.queuedAt],
    ['try', (r) => r.tryCount],
    ['deadline', (r) => r.deadline],
    ['priority', (r) => r.priority],
    ['debounce', (r) => r.debounce],
    ['concurrency', (r) => concurrencyText(r.concurrency)],
  ],
  scheduled: [
    ['due', (r) => r.dueAt],
    ['where', (r) => r.store],
    ['queued', (r) => r.queuedAt],
    ['deadline', (r) => r.deadline],
    ['priority', (r) => r.priority],
    ['debounce', (r) => r.debounce],
    ['concurrency', (r) => concurrencyText(r.concurrency)],
  ],
  'in-flight': [
    ['lease expires', (r) => r.leaseExpiresAt],
    ['deliveries', (r) => r.deliveries],
    ['try', (r) => r.tryCount],
    ['deadline', (r) => r.deadline],
    ['priority', (r) => r.priority],
    ['debounce', (r) => r.debounce],
    ['concurrency', (r) => concurrencyText(r.concurrency)],
  ],
  dead: [
    ['dead', (r) => r.deadAt],
    ['reason', (r) => r.reason],
  ],
};

function tasksBody(
  operator: Operator,
  state: TaskState,
  filter: TaskFilter,
  rows: TaskPage | { error: string },
): Html {
  const field = (name: keyof TaskFilter, label: string, placeholder: string) =>
    html`<label>${label}<input name="${name}" value="${filter[name] ?? ''}" placeholder="${placeholder}"></label>`;
  const query = (extra: Record<string, string>) =>
    new URLSearchParams({ state, ...(filter as Record<string, string>), ...extra }).toString();
  const tabs = html`<nav class="tabs" data-tabs="states">${TASK_STATES.map(
    (s) =>
      html`<a href="/ui/tasks?${new URLSearchParams({ ...(filter as Record<string, string>), state: s }).toString()}" class="${s === state ? 'on' : ''}" data-state="${s}">${s}</a>`,
  )}</nav>`;
  const selected = Object.values(filter).some((v) => v !== undefined);
  const canCancel =
    operator.admin === 'write' && selected && CANCELLABLE_STATES.includes(state as CancellableState);
  const columns = COLUMNS[state];
  return html`<section>${tabs}<form class="filters" method="get" action="/ui/tasks"><input type="hidden" name="state" value="${state}">${field('client', 'client', 'API key name')}${field('origin', 'origin', 'https://api.x.com')}${field('partition', 'partition', 'meta.partition')}${field('dueAfter', state === 'in-flight' ? 'expires after' : state === 'dead' ? 'dead after' : 'due after', 'RFC 3339')}${field('dueBefore', state === 'in-flight' ? 'expires before' : state === 'dead' ? 'dead before' : 'due before', 'RFC 3339')}${field('olderThan', 'older than', '10m')}<button>Filter</button></form></section>
<section>${
    'error' in rows
      ? html`<div class="flash err">${rows.error}</div>`
      : html`${
          rows.rows.length === 0
            ? html`<p class="muted">No ${state} tasks on this page.</p>`
            : html`<table data-state="${state}"><tr><th>requestId</th><th>client</th>${columns.map(([name]) => html`<th>${name}</th>`)}<th>origin</th><th>partition</th><th>URL</th></tr>${rows.rows.map(
                (r) =>
                  html`<tr><td>${r.requestId ? html`<a href="/ui/requests?id=${encodeURIComponent(r.requestId)}${r.client ? `&client=${encodeURIComponent(r.client)}` : ''}">${r.requestId}</a>` : '–'}</td><td>${r.client ?? '–'}</td>${columns.map(([, value]) => html`<td>${String(value(r) ?? '–')}</td>`)}<td>${r.origin ?? '–'}</td><td>${r.partition ?? '–'}</td><td><code>${r.uri ?? '–'}</code></td></tr>`,
              )}</table>`
        }${rows.next ? html`<p><a href="/ui/tasks?${query({ cursor: rows.next })}" data-page="next">Next page</a></p>` : ''}${
          canCancel
            ? html`<p><button hx-post="/admin/api/tasks/${state}/cancel" hx-vals='${JSON.stringify(filter)}' hx-target="#flash" data-action="cancel-preview">Cancel matching…</button> <span class="muted">first counts them; nothing is cancelled before you confirm</span></p>`
            : ''
        }`
  }</section>`;
}
