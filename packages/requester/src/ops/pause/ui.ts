import { html } from 'hono/html';
import { page } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import type { Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import type { PauseRow } from './index.ts';

/**
 * The Pauses page: the pauses in force (refreshed every 3 s) with a Resume button each, and a form
 * to pause an origin, a client or a partition. Buttons and the form for a write key only.
 */
export const ui: UiFace = {
  nav: ['/ui/pauses', 'Pauses'],
  routes(app, console) {
    app.get('/ui/pauses', (c) => page(c, 'Pauses', pausesBody(c.get('operator'))));
    app.get('/ui/pauses/live', async (c) => c.html(pausesTable(c.get('operator'), await console.pauses())));
  },
};

function pausesBody(operator: Operator): Html {
  const canAct = operator.admin === 'write';
  return html`${
    canAct
      ? html`<section><h2>Pause</h2><form class="filters" hx-post="/admin/api/pauses" hx-target="#flash" data-action="pause-form">
<label>scope<select name="scope"><option>origin</option><option>client</option><option>partition</option><option>destination</option></select></label>
<label>value<input name="value" size="36" placeholder="https://api.partner.example, a client, or a partition"></label>
<label>client<input name="client" placeholder="partition: whose"></label>
<label>until<input name="until" placeholder="2h, or 2026-12-01T14:00:00Z (blank: until resumed)"></label>
<button data-action="pause">Pause</button></form>
<p class="muted">Every executor honours a pause from its next lease, a resume within a second. Paused tasks stay queued, in order, and are not attempted (no attempt, no limiter token, no breaker failure).</p></section>`
      : ''
  }
<section><h2>In force</h2><div hx-get="/ui/pauses/live" hx-trigger="load, every 3s, refresh from:body" hx-swap="innerHTML"></div></section>`;
}

function pausesTable(operator: Operator, rows: PauseRow[]): Html {
  if (rows.length === 0) return html`<p class="muted">Nothing is paused.</p>`;
  const canAct = operator.admin === 'write';
  return html`<table><tr><th>scope</th><th>value</th><th>by</th><th>since</th><th>until</th>${canAct ? html`<th></th>` : ''}</tr>${rows.map(
    (r) =>
      html`<tr><td>${r.scope}</td><td><code>${r.value}</code></td><td>${r.by}</td><td>${r.since ?? '–'}</td><td>${r.until ?? 'resumed by hand'}</td>${
        canAct
          ? html`<td><button class="small" hx-post="/admin/api/pauses/resume" hx-vals='${JSON.stringify({ scope: r.scope, value: r.value })}' hx-target="#flash" data-action="resume">Resume</button></td>`
          : ''
      }</tr>`,
  )}</table>`;
}
