import { html } from 'hono/html';
import { page } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import { at, type Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { CALLS_WINDOW_MINUTES, listOrigins, type OriginView } from './index.ts';

/**
 * The Origins page: every target origin known across the deployment (./index.ts), refreshed every
 * 5 s — breaker, in flight/cap, pace, learnt limit, pause, calls and latency of the last minutes —
 * with Pause/Resume (and Reset of a breaker not closed) for a write key.
 */
export const ui: UiFace = {
  nav: ['/ui/origins', 'Origins'],
  routes(app, console) {
    app.get('/ui/origins', (c) =>
      page(
        c,
        'Origins',
        html`<section><h2>Target origins</h2><p class="muted">Across the deployment: calls of the last ${CALLS_WINDOW_MINUTES} minutes (executors flush every 5 s); origins called within 2 hours, with a breaker not closed, or paused. In flight is deployment-wide with ORIGIN_CONCURRENCY_SCOPE=cluster, else counted by each executor (?).</p>
<div id="origins" hx-get="/ui/origins/live" hx-trigger="load, every 5s, refresh from:body"></div></section>`,
      ),
    );
    app.get('/ui/origins/live', async (c) =>
      c.html(originsTable(c.get('operator'), await listOrigins(console.originParts()))),
    );
  },
};

const percent = (rate: number | null) => (rate === null ? '–' : `${(rate * 100).toFixed(1)} %`);
const ms = (value: number | null) => (value === null ? '–' : `≤ ${value} ms`);

function originsTable(operator: Operator, rows: OriginView[]): Html {
  if (rows.length === 0)
    return html`<p class="muted">No origin called within 2 hours, none with an open breaker, none paused.</p>`;
  const canAct = operator.admin === 'write';
  return html`<table><tr><th>origin</th><th>breaker</th><th>in flight / cap</th><th>pace</th><th>limit</th><th>paused</th><th>attempts</th><th>success</th><th>p50</th><th>p95</th><th>last call</th>${canAct ? html`<th></th>` : ''}</tr>${rows.map(
    (o) => html`<tr data-origin="${o.origin}"><td><code>${o.origin}</code></td>
<td class="${o.breaker.state === 'open' ? 'bad' : o.breaker.state === 'closed' ? 'ok' : 'warn'}">${o.breaker.state}${o.breaker.openUntil ? html` until ${at(o.breaker.openUntil)}` : ''}</td>
<td class="n">${o.bulkhead.inFlight ?? '?'} / ${o.bulkhead.cap}</td>
<td>${o.pace.rate === null ? 'unpaced' : `${o.pace.rate.toFixed(1)}/s`}${o.pace.holdUntil ? html`, held until ${at(o.pace.holdUntil)}` : ''}</td>
<td class="n">${o.pace.limit ?? '–'}</td>
<td class="${o.pause ? 'warn' : ''}">${o.pause ? html`by ${o.pause.by}${o.pause.until ? html`, until ${at(o.pause.until)}` : ''}` : 'no'}</td>
<td class="n">${o.calls.attempts}</td><td class="n">${percent(o.calls.successRate)}</td><td class="n">${ms(o.calls.p50Ms)}</td><td class="n">${ms(o.calls.p95Ms)}</td><td>${at(o.calls.lastSeen)}</td>${
      canAct ? html`<td>${actions(o)}</td>` : ''
    }</tr>`,
  )}</table>`;
}

function actions(o: OriginView): Html {
  const target = JSON.stringify({ scope: 'origin', value: o.origin });
  return html`${
    o.pause
      ? html`<button class="small" hx-post="/admin/api/pauses/resume" hx-vals='${target}' hx-target="#flash" data-action="resume">Resume</button>`
      : html`<button class="small" hx-post="/admin/api/pauses" hx-vals='${target}' hx-target="#flash" data-action="pause">Pause</button>`
  }${
    o.breaker.state === 'closed'
      ? ''
      : html` <button class="small" hx-post="/admin/api/breakers/reset" hx-vals='${JSON.stringify({ origin: o.origin })}' hx-target="#flash" data-action="reset">Reset breaker</button>`
  }`;
}
