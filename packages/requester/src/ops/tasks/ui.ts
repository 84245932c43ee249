import { html } from 'hono/html';
import { messageOf, page } from '../../admin-server/http.ts';
import type { Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { scheduledQuery } from './api.ts';
import { type ScheduledFilter, type ScheduledRow, scheduledPage } from './index.ts';

/**
 * The Tasks page (scheduled): a filter form, one page of rows, a link to the next page, and for a
 * write key with a selection the Cancel button with its preview count.
 */
export const ui: UiFace = {
  nav: ['/ui/tasks', 'Tasks'],
  routes(app, console) {
    app.get('/ui/tasks', async (c) => {
      const { filter, limit, cursor } = scheduledQuery(c);
      const rows = await scheduledPage(await console.sql(), filter, limit, cursor).catch(messageOf);
      const selected = filter.client !== undefined || filter.dueAfter || filter.dueBefore;
      const matched =
        c.get('operator').admin === 'write' && selected && !('error' in rows)
          ? (await console.cancelScheduled(c.get('operator'), filter, false)).matched
          : undefined;
      return page(c, 'Tasks', scheduledBody(filter, rows, matched));
    });
  },
};

function scheduledBody(
  filter: ScheduledFilter,
  rows: { rows: ScheduledRow[]; next: string | null } | { error: string },
  /** For a write key with a selection: how many match (the Cancel button's preview). */
  matched?: number,
): Html {
  const field = (name: keyof ScheduledFilter, label: string, placeholder: string) =>
    html`<label>${label}<input name="${name}" value="${filter[name] ?? ''}" placeholder="${placeholder}"></label>`;
  const query = (cursor: string) =>
    new URLSearchParams({ ...(filter as Record<string, string>), cursor }).toString();
  return html`<section><h2>Scheduled (the outbox)</h2><form class="filters" method="get" action="/ui/tasks">${field('client', 'client', 'API key name')}${field('dueAfter', 'due after', 'RFC 3339')}${field('dueBefore', 'due before', 'RFC 3339')}<button>Filter</button></form></section>
<section>${
    'error' in rows
      ? html`<div class="flash err">${rows.error}</div>`
      : rows.rows.length === 0
        ? html`<p class="muted">Nothing scheduled matches.</p>`
        : html`<table><tr><th>requestId</th><th>client</th><th>due</th><th>origin</th><th>partition</th><th>URL</th></tr>${rows.rows.map(
            (r) =>
              html`<tr><td><a href="/ui/requests?id=${encodeURIComponent(r.requestId)}${r.client ? `&client=${encodeURIComponent(r.client)}` : ''}">${r.requestId}</a></td><td>${r.client ?? '–'}</td><td>${r.dueAt ?? '–'}</td><td>${r.origin ?? '(wake-up)'}</td><td>${r.partition ?? '–'}</td><td><code>${r.uri ?? '–'}</code></td></tr>`,
          )}</table>${rows.next ? html`<p><a href="/ui/tasks?${query(rows.next)}" data-page="next">Next page</a></p>` : ''}${
            matched === undefined
              ? ''
              : html`<p><button hx-post="/admin/api/tasks/scheduled/cancel" hx-vals='${JSON.stringify({ ...filter, confirm: true })}' hx-target="#flash" hx-confirm="Cancel the ${matched} scheduled requests this selection matches?" data-action="cancel-selection">Cancel the ${matched} matching</button></p>`
          }`
  }</section>`;
}
