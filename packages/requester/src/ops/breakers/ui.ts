import { html } from 'hono/html';
import { page } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import { at, type Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { originQuery } from './api.ts';
import { type BreakerView, listBreakers, showBreaker } from './index.ts';

export const ui: UiFace = {
  nav: ['/ui/breakers', 'Breakers'],
  routes(app, console) {
    app.get('/ui/breakers', (c) => page(c, 'Breakers', breakersPage()));
    app.get('/ui/breakers/live', async (c) =>
      c.html(breakersTable(c.get('operator'), await listBreakers(console.breaker(), 1_000))),
    );
    app.get('/ui/breakers/show', async (c) => {
      const origin = originQuery(c.req.query('origin'));
      return c.html(breakerDetail(c.get('operator'), await showBreaker(console.breaker(), origin)));
    });
  },
};

function breakersPage(): Html {
  return html`<section><form class="filters" hx-get="/ui/breakers/show" hx-target="#one"><label>origin or URL<input name="origin" size="40" placeholder="https://api.x.com"></label><button>Show</button></form><div id="one"></div></section>
<section><h2>Held origins, open and half-open breakers</h2><div id="breakers" hx-get="/ui/breakers/live" hx-trigger="load, every 5s, refresh from:body"></div></section>`;
}

export function breakersTable(operator: Operator, rows: BreakerView[]): Html {
  if (rows.length === 0) return html`<p class="muted">Every breaker is closed.</p>`;
  return html`<table><tr><th>origin</th><th>state</th><th>held back</th><th>failures in a row</th><th>opens in a row</th><th>open since</th><th>open until</th><th>probing</th>${operator.admin === 'write' ? html`<th></th>` : ''}</tr>
${rows.map((b) => breakerRow(operator, b))}</table>`;
}

function breakerRow(operator: Operator, b: BreakerView): Html {
  return html`<tr><td>${b.origin}</td><td class="${b.state === 'open' ? 'bad' : b.state === 'closed' ? 'ok' : 'warn'}">${b.state}</td>
<td class="${b.held ? 'bad' : ''}">${held(b)}</td><td class="n">${b.failures ?? '–'}</td><td class="n">${b.opensInARow}</td><td>${at(b.openSince)}</td><td>${at(b.openUntil)}</td><td>${b.slots > 0 ? 'yes' : 'no'}</td>${
    operator.admin === 'write'
      ? html`<td><button hx-post="/admin/api/breakers/reset" hx-vals='${JSON.stringify({ origin: b.origin })}' hx-target="#flash" data-action="reset">Reset</button></td>`
      : ''
  }</tr>`;
}

export function breakerDetail(operator: Operator, b: BreakerView): Html {
  return html`<table><tr><th>origin</th><th>state</th><th>held back</th><th>failures in a row</th><th>opens in a row</th><th>open since</th><th>open until</th><th>probing</th>${operator.admin === 'write' ? html`<th></th>` : ''}</tr>
<tr><td>${b.origin}</td><td>${b.state}</td><td>${held(b)}</td><td class="n">${b.failures ?? '–'}</td><td class="n">${b.opensInARow}</td><td>${at(b.openSince)}</td><td>${at(b.openUntil)}</td><td>${b.slots > 0 ? 'yes' : 'no'}</td>${
    operator.admin === 'write'
      ? html`<td><button hx-post="/admin/api/breakers/reset" hx-vals='${JSON.stringify({ origin: b.origin })}' hx-target="#flash" data-action="reset">Reset</button></td>`
      : ''
  }</tr></table>`;
}

/** `failing since …` / `opt_out since …`, or `no`. */
function held(b: BreakerView): Html | string {
  return b.held ? html`${b.held} since ${at(b.heldSince)}` : 'no';
}
