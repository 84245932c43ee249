import { html } from 'hono/html';
import { page } from '../../admin-server/http.ts';
import type { Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { partitions } from './api.ts';
import type { PartitionRow } from './index.ts';

export const ui: UiFace = {
  nav: ['/ui/partitions', 'Partitions'],
  routes(app, console) {
    app.get('/ui/partitions', (c) =>
      page(
        c,
        'Partitions',
        html`<div hx-get="/ui/partitions/live" hx-trigger="load, every 5s" hx-swap="innerHTML"></div>`,
      ),
    );
    app.get('/ui/partitions/live', async (c) => c.html(partitionsLive(await partitions(console, 10))));
  },
};

function partitionTable(rows: PartitionRow[], empty: string): Html {
  if (rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`<table><tr><th>partition</th><th>state</th><th>pending</th><th>in flight</th><th>head task</th><th>request</th><th>tries</th><th>why it waits</th></tr>
${rows.map(
  (
    p,
  ) => html`<tr><td><code>${p.partition}</code></td><td class="${p.state === 'ready' ? 'ok' : 'warn'}">${p.state}</td>
<td class="n">${p.pending}</td><td class="n">${p.inFlight}</td><td><code>${p.head?.id ?? '–'}</code></td>
<td>${p.requestId ? html`<a href="/ui/requests?id=${encodeURIComponent(p.requestId)}">${p.requestId}</a>` : '–'}${p.origin ? html`<div class="muted">${p.origin}</div>` : ''}</td>
<td class="n">${p.tryCount ?? '–'}</td><td>${p.why}</td></tr>`,
)}</table>`;
}

export function partitionsLive(data: { heaviest: PartitionRow[]; held: PartitionRow[] }): Html {
  return html`<section><h2>Heaviest partitions (most pending)</h2>${partitionTable(data.heaviest, 'Nothing pending.')}</section>
<section><h2>Most held back (waiting or blocked, oldest head first)</h2>${partitionTable(data.held, 'No partition is held back.')}</section>
<p class="muted">A bounded sample per shard (O(k), no scan of the tasks). Why a head waits is inferred from its progress, its origin's breaker and its limiter key.</p>`;
}
