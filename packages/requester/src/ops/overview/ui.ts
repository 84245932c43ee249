import { html } from 'hono/html';
import { page } from '../../admin-server/http.ts';
import { at, type Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { humanSpan, humanTime } from '../format.ts';
import { type OverviewData, overview, series } from './index.ts';

export const ui: UiFace = {
  nav: ['/ui/overview', 'Overview'],
  routes(app, console) {
    app.get('/ui', (c) => c.redirect('/ui/overview', 303));
    app.get('/ui/overview', (c) =>
      page(
        c,
        'Overview',
        html`<div id="live" hx-get="/ui/overview/live" hx-trigger="load, every 3s" hx-swap="innerHTML"></div>
<section><h2>Throughput and latency (this process)</h2><div id="chart" data-series="/ui/overview/series"></div></section>`,
      ),
    );
    app.get('/ui/overview/live', async (c) => c.html(overviewLive(await overview(console))));
    app.get('/ui/overview/series', (c) => c.json(series(console)));
  },
};

const fmtRate = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(1));
const fmtMs = (n: number | null | undefined) => (n === null || n === undefined ? '–' : `${Math.round(n)} ms`);

function card(label: string, value: string | number, cls = ''): Html {
  return html`<div class="card"><div class="v ${cls}">${value}</div><div class="k">${label}</div></div>`;
}

export function overviewLive(data: OverviewData): Html {
  const { queue, outbox, live } = data;
  const t = queue.totals;
  const busy = queue.shards.filter((s) => s.pending + s.inFlight + s.dead > 0);
  const outboxCards =
    'error' in outbox
      ? card('outbox', 'unavailable', 'bad')
      : html`${card('outbox rows', outbox.rows)}${card('outbox overdue', outbox.overdue, outbox.overdue > 0 ? 'warn' : '')}${card('outbox next due', at(outbox.nextDueAt))}`;
  return html`<div class="cards">
${card('settled / s', fmtRate(live?.settledPerS))}${card('HTTP requests / s', fmtRate(live?.httpPerS))}
${card('target latency (mean)', fmtMs(live?.latencyMeanMs))}${card('target latency (p95 ≤)', fmtMs(live?.latencyP95Ms))}
${card('queue depth', t.pending)}${card('oldest task', queue.oldestTaskAgeMs === null ? '–' : humanSpan(queue.oldestTaskAgeMs), (queue.oldestTaskAgeMs ?? 0) > 60_000 ? 'warn' : '')}
${card('in flight', t.inFlight)}${card('ready partitions', t.readyPartitions)}${card('waiting partitions', t.waitingPartitions)}
${card('blocked partitions', t.blockedPartitions)}${card('dead tasks', t.dead, t.dead > 0 ? 'warn' : '')}
${outboxCards}${card('in lag', live?.lag === null || live?.lag === undefined ? 'n/a' : live.lag)}
${card('breakers open', data.breakersOpen, data.breakersOpen > 0 ? 'bad' : 'ok')}${card('breakers half-open', data.breakersHalfOpen)}
</div>
<section><h2>Shards holding tasks</h2>${
    busy.length === 0
      ? html`<p class="muted">Every shard is empty.</p>`
      : html`<table><tr><th>shard</th><th>pending</th><th>in flight</th><th>dead</th><th>ready</th><th>waiting</th><th>blocked</th><th>oldest task</th></tr>
${busy.map(
  (s) =>
    html`<tr><td>${s.shard}</td><td class="n">${s.pending}</td><td class="n">${s.inFlight}</td><td class="n">${s.dead}</td><td class="n">${s.readyPartitions}</td><td class="n">${s.waitingPartitions}</td><td class="n">${s.blockedPartitions}</td><td>${humanTime(s.oldestPublishedAt)}</td></tr>`,
)}</table>`
  }</section>`;
}
