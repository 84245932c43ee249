import { html } from 'hono/html';
import { limitOf, messageOf, page } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import { at, type Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { deadLetters, selectionOf } from './api.ts';
import type { DeadLetterView } from './index.ts';

export const ui: UiFace = {
  nav: ['/ui/dlq', 'Dead letters'],
  routes(app, console) {
    app.get('/ui/dlq', async (c) => {
      const selection = selectionOf(c.req.query());
      const data = await deadLetters(console, selection, limitOf(c.req.query('limit'), 100)).catch(messageOf);
      return page(c, 'Dead letters', dlqBody(c.get('operator'), c.req.query(), data));
    });
  },
};

function dlqBody(
  operator: Operator,
  selection: Record<string, string>,
  data: { entries: DeadLetterView[]; read: number; matched: number } | { error: string },
): Html {
  const canAct = operator.admin === 'write';
  const field = (name: string, label: string, placeholder = '') =>
    html`<label>${label}<input name="${name}" value="${selection[name] ?? ''}" placeholder="${placeholder}"></label>`;
  return html`<section><form class="filters" method="get" action="/ui/dlq">
${field('origin', 'origin', 'https://api.x.com')}${field('errorCode', 'error code', 'timeout')}${field('client', 'client')}
${field('since', 'since', '2026-12-01T00:00:00Z')}${field('until', 'until')}<button>Filter</button></form></section>
<section>${
    'error' in data
      ? html`<div class="flash err">${data.error}</div>`
      : html`<form id="dlq-form" hx-target="#flash">
<p class="muted">${data.entries.length} shown of ${data.matched} matching (${data.read} records read). Handled (deleted) ones are left out.</p>
${
  data.entries.length === 0
    ? html`<p class="muted">No dead letters.</p>`
    : html`<table><tr>${canAct ? html`<th></th>` : ''}<th>failed</th><th>requestId</th><th>origin</th><th>client</th><th>reason</th><th>status</th><th>error</th><th>tries</th></tr>
${data.entries.map(
  (
    d,
  ) => html`<tr>${canAct ? html`<td><input type="checkbox" name="refs" value="${d.ref}" data-request-id="${d.requestId ?? ''}"></td>` : ''}
<td>${at(d.failedAt)}</td><td>${d.requestId ? html`<a href="/ui/requests?id=${encodeURIComponent(d.requestId)}">${d.requestId}</a>` : '–'}</td>
<td>${d.origin ?? '–'}</td><td>${d.client ?? '–'}</td><td>${d.reason}</td><td class="n">${d.status}</td><td>${d.errorCode ?? '–'}</td><td class="n">${d.tryCount}</td></tr>`,
)}</table>
${
  canAct
    ? html`<p><button type="button" hx-post="/admin/api/dlq/replay" hx-include="#dlq-form" data-action="replay-selected">Replay selected</button>
${
  Object.keys(selection).some(
    (k) => ['origin', 'errorCode', 'client', 'since', 'until'].includes(k) && selection[k],
  )
    ? html`<button type="button" hx-post="/admin/api/dlq/replay" hx-vals='${JSON.stringify({ ...pick(selection), dryRun: true })}' hx-target="#flash" data-action="replay-preview">Replay all matching…</button>`
    : ''
}
<button type="button" class="danger" hx-post="/admin/api/dlq/delete" hx-include="#dlq-form" hx-confirm="Mark the selected dead letters as handled?" data-action="delete-selected">Delete selected</button></p>
<p class="muted">Delete marks them handled (the DLQ is a Kafka topic: its records stay until retention).</p>`
    : ''
}`
}</form>`
  }</section>`;
}

/** The filter fields of the page's query (the selection a "Replay all matching" replays). */
function pick(query: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    ['origin', 'errorCode', 'client', 'since', 'until'].flatMap((k) => (query[k] ? [[k, query[k]]] : [])),
  );
}
