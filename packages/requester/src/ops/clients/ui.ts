import { html } from 'hono/html';
import { page } from '../../admin-server/http.ts';
import type { Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { humanSpan } from '../format.ts';
import { type ClientView, topArg, topClients } from './index.ts';

/** The Clients page: the top clients by backlog (./index.ts), refreshed every 5 s. */
export const ui: UiFace = {
  nav: ['/ui/clients', 'Clients'],
  routes(app, console) {
    app.get('/ui/clients', (c) => {
      const top = topArg(c.req.query('top'));
      return page(
        c,
        'Clients',
        html`<section><h2>Clients by backlog</h2><form class="filters" method="get" action="/ui/clients"><label>top<input name="top" size="4" value="${top}"></label><button>Show</button></form>
<p class="muted">Under saturation each client gets workers in proportion to its weight (a weight-3 client three tasks for each of a weight-1 one). "waited": how long the task its next turn would lease has waited. Ready partitions per client: <code>requester queue info --by-client</code> or <code>/admin/api/clients</code> (they read every ready partition).</p>
<div id="clients" hx-get="/ui/clients/live?top=${top}" hx-trigger="load, every 5s, refresh from:body"></div></section>`,
      );
    });
    app.get('/ui/clients/live', async (c) =>
      c.html(
        clientsTable(
          // Refreshed every 5 s: the clients' fronts only, not a count of every ready partition.
          await topClients(
            console.queueAdmin(),
            (await console.keysParts()).store,
            topArg(c.req.query('top')),
            {
              readyPartitions: false,
            },
          ),
        ),
      ),
    );
  },
};

function clientsTable(rows: ClientView[]): Html {
  if (rows.length === 0) return html`<p class="muted">No client has pending tasks.</p>`;
  return html`<table><tr><th>client</th><th>backlog</th><th>in flight</th><th>weight</th><th>cap</th><th>rate</th><th>waited</th></tr>${rows.map(
    (r) =>
      html`<tr data-client="${r.client}"><td>${r.client === '' ? '(none)' : r.client}${r.liveKey || r.client === '' ? '' : html` <span class="muted">(no live key)</span>`}</td><td class="n">${r.backlog}</td><td class="n">${r.inFlight ?? '–'}</td><td class="n">${r.weight}</td><td class="n">${r.cap ?? '–'}</td><td>${r.rate ?? '–'}</td><td>${r.oldestWaitMs === null ? '–' : humanSpan(r.oldestWaitMs)}</td></tr>`,
  )}</table>`;
}
