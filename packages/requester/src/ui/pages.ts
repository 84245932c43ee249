import type { QueueInfo } from '@requester/queue';
import { html } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { Operator } from '../admin-server/console.ts';
import { humanSize, humanSpan, humanTime } from '../commands/common.ts';
import { cancelButton } from '../ops/cancel/ui.ts';
import type { BreakerView, DeadLetterView, LimiterView, OutboxView, PartitionRow } from '../ops/index.ts';
import type { LiveSample } from './live.ts';

/**
 * The operator UI's HTML: server-rendered with Hono's `html` (every value escaped), htmx for the
 * live parts and the actions, uPlot for the chart; no build step, every asset served from
 * node_modules by the admin server (`/ui/assets/…`). Buttons that act are rendered only for a
 * write key; the API refuses a read key's actions anyway (403). Nothing is inline — no script, no
 * style, no style attribute — so the Content-Security-Policy of the admin port (app.ts) allows
 * only files of /ui/assets; htmx is told to evaluate no code and inject no style (htmx-config).
 */
type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

const NAV: ReadonlyArray<[string, string]> = [
  ['/ui/overview', 'Overview'],
  ['/ui/partitions', 'Partitions'],
  ['/ui/requests', 'Request lookup'],
  ['/ui/dlq', 'Dead letters'],
  ['/ui/tasks', 'Tasks'],
  ['/ui/pauses', 'Pauses'],
  ['/ui/breakers', 'Breakers'],
  ['/ui/limiters', 'Limiters'],
];

export function layout(title: string, path: string, operator: Operator | undefined, body: Html): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title} · Requester</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="htmx-config" content='{"allowEval":false,"allowScriptTags":false,"includeIndicatorStyles":false}'>
<link rel="stylesheet" href="/ui/assets/uplot.css">
<link rel="stylesheet" href="/ui/assets/ui.css">
<script src="/ui/assets/htmx.js"></script>
<script src="/ui/assets/uplot.js"></script>
<script src="/ui/assets/app.js" defer></script>
</head><body>
<header><b>Requester</b><nav>${NAV.map(
    ([href, label]) => html`<a href="${href}" class="${href === path ? 'on' : ''}">${label}</a>`,
  )}</nav>${
    operator
      ? html`<span class="who">${operator.name} · ${operator.admin === 'write' ? 'admin' : 'read-only'}
<form method="post" action="/ui/logout" class="inline"><button class="small" id="logout">Log out</button></form></span>`
      : ''
  }</header>
<main><div id="flash"></div>${body}</main></body></html>`;
}

export function loginPage(error?: string): Html {
  return layout(
    'Log in',
    '',
    undefined,
    html`<section class="login">
<h2>Operator login</h2>
<p class="muted">An API key with an admin scope: <code>requester keys create --name you --admin read|write</code>.
Logging in opens a session (an HttpOnly cookie of this admin port); the key itself is not kept.</p>
${error ? html`<div class="flash err">${error}</div>` : ''}
<form method="post" action="/ui/login"><input name="token" type="password" placeholder="rqk_…" autocomplete="off">
<p><button type="submit">Log in</button></p></form></section>`,
  );
}

const fmtRate = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(1));
const fmtMs = (n: number | null | undefined) => (n === null || n === undefined ? '–' : `${Math.round(n)} ms`);
const at = (isoText: string | null | undefined) => humanTime(isoText ? Date.parse(isoText) : null);

export function overviewPage(operator: Operator): Html {
  return layout(
    'Overview',
    '/ui/overview',
    operator,
    html`<div id="live" hx-get="/ui/overview/live" hx-trigger="load, every 3s" hx-swap="innerHTML"></div>
<section><h2>Throughput and latency (this process)</h2><div id="chart" data-series="/ui/overview/series"></div></section>`,
  );
}

export interface OverviewData {
  queue: QueueInfo;
  outbox: OutboxView | { error: string };
  breakersOpen: number;
  breakersHalfOpen: number;
  live: LiveSample | null;
}

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

export function partitionsPage(operator: Operator): Html {
  return layout(
    'Partitions',
    '/ui/partitions',
    operator,
    html`<div hx-get="/ui/partitions/live" hx-trigger="load, every 5s" hx-swap="innerHTML"></div>`,
  );
}

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

export function requestPage(
  operator: Operator,
  id: string,
  client: string,
  data: { result: unknown; resultSource: string | null; deadLetters: DeadLetterView[] } | undefined,
  revealed = false,
): Html {
  const canAct = operator.admin === 'write';
  const revealHref = `/ui/requests?id=${encodeURIComponent(id)}${client ? `&client=${encodeURIComponent(client)}` : ''}&reveal=true`;
  const replay = { requestIds: [id], ...(client ? { client } : {}) };
  return layout(
    'Request lookup',
    '/ui/requests',
    operator,
    html`<section><form class="filters" method="get" action="/ui/requests"><label>requestId<input name="id" value="${id}" size="40"></label><label>client<input name="client" value="${client}" placeholder="API key name (requestIds are per client)"></label><button>Look up</button></form></section>
${
  data
    ? html`<section><p class="muted" id="secrets">${
        revealed
          ? html`<span class="warn">Shown in full: this look-up is journaled as yours.</span>`
          : html`Credentials (authorization, cookies, keys, tokens, URL passwords), bodies and proxyData are hidden.${
              canAct ? html` <a href="${revealHref}" data-action="reveal">Show them (journaled)</a>` : ''
            }`
      }</p></section>
<section><h2>Result</h2>${
        data.result
          ? html`<pre>${JSON.stringify(data.result, null, 2)}</pre>`
          : html`<p class="muted">${data.resultSource ? 'The sync-gateway of this process holds no result for it (never seen, or evicted).' : 'No sync-gateway runs in this process: results are on the out topic.'}</p>`
      }</section>
<section><h2>Dead letters</h2>${
        data.deadLetters.length === 0
          ? html`<p class="muted">None.</p>`
          : html`<table><tr><th>failed</th><th>reason</th><th>status</th><th>error</th><th>tries</th><th>URL</th><th>DLQ record</th></tr>${data.deadLetters.map(
              (d) =>
                html`<tr><td>${at(d.failedAt)}</td><td>${d.reason}</td><td class="n">${d.status}</td><td>${d.errorCode ?? '–'}</td><td class="n">${d.tryCount}</td><td><code>${d.uri ?? '–'}</code></td><td><code>${d.ref}</code></td></tr>`,
            )}</table>
${canAct ? html`<p><button hx-post="/admin/api/dlq/replay" hx-vals='${JSON.stringify(replay)}' hx-target="#flash" data-action="replay">Replay</button></p>` : ''}`
      }</section>
${cancelButton(operator, id, client)}
<section><h2>Journal</h2><div id="timeline" data-events="/admin/api/requests/${encodeURIComponent(id)}/events">loading…</div></section>`
    : ''
}`,
  );
}

export function dlqPage(
  operator: Operator,
  selection: Record<string, string>,
  data: { entries: DeadLetterView[]; read: number; matched: number } | { error: string },
): Html {
  const canAct = operator.admin === 'write';
  const field = (name: string, label: string, placeholder = '') =>
    html`<label>${label}<input name="${name}" value="${selection[name] ?? ''}" placeholder="${placeholder}"></label>`;
  return layout(
    'Dead letters',
    '/ui/dlq',
    operator,
    html`<section><form class="filters" method="get" action="/ui/dlq">
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
<button type="button" class="danger" hx-post="/admin/api/dlq/delete" hx-include="#dlq-form" hx-confirm="Mark the selected dead letters as handled?" data-action="delete-selected">Delete selected</button></p>
<p class="muted">Delete marks them handled (the DLQ is a Kafka topic: its records stay until retention).</p>`
    : ''
}`
}</form>`
    }</section>`,
  );
}

export function breakersPage(operator: Operator): Html {
  return layout(
    'Breakers',
    '/ui/breakers',
    operator,
    html`<section><form class="filters" hx-get="/ui/breakers/show" hx-target="#one"><label>origin or URL<input name="origin" size="40" placeholder="https://api.x.com"></label><button>Show</button></form><div id="one"></div></section>
<section><h2>Open and half-open breakers</h2><div id="breakers" hx-get="/ui/breakers/live" hx-trigger="load, every 5s, refresh from:body"></div></section>`,
  );
}

export function breakersTable(operator: Operator, rows: BreakerView[]): Html {
  if (rows.length === 0) return html`<p class="muted">Every breaker is closed.</p>`;
  return html`<table><tr><th>origin</th><th>state</th><th>failures in a row</th><th>opens in a row</th><th>open since</th><th>open until</th><th>probing</th>${operator.admin === 'write' ? html`<th></th>` : ''}</tr>
${rows.map((b) => breakerRow(operator, b))}</table>`;
}

function breakerRow(operator: Operator, b: BreakerView): Html {
  return html`<tr><td>${b.origin}</td><td class="${b.state === 'open' ? 'bad' : b.state === 'closed' ? 'ok' : 'warn'}">${b.state}</td>
<td class="n">${b.failures ?? '–'}</td><td class="n">${b.opensInARow}</td><td>${at(b.openSince)}</td><td>${at(b.openUntil)}</td><td>${b.slots > 0 ? 'yes' : 'no'}</td>${
    operator.admin === 'write'
      ? html`<td><button hx-post="/admin/api/breakers/reset" hx-vals='${JSON.stringify({ origin: b.origin })}' hx-target="#flash" data-action="reset">Reset</button></td>`
      : ''
  }</tr>`;
}

export function breakerDetail(operator: Operator, b: BreakerView): Html {
  return html`<table><tr><th>origin</th><th>state</th><th>failures in a row</th><th>opens in a row</th><th>open since</th><th>open until</th><th>probing</th>${operator.admin === 'write' ? html`<th></th>` : ''}</tr>
<tr><td>${b.origin}</td><td>${b.state}</td><td class="n">${b.failures ?? '–'}</td><td class="n">${b.opensInARow}</td><td>${at(b.openSince)}</td><td>${at(b.openUntil)}</td><td>${b.slots > 0 ? 'yes' : 'no'}</td>${
    operator.admin === 'write'
      ? html`<td><button hx-post="/admin/api/breakers/reset" hx-vals='${JSON.stringify({ origin: b.origin })}' hx-target="#flash" data-action="reset">Reset</button></td>`
      : ''
  }</tr></table>`;
}

export function limitersPage(
  operator: Operator,
  query: { key: string; rates: string[]; apiKey: boolean; client: string | undefined },
  views: LimiterView[] | { error: string } | undefined,
): Html {
  return layout(
    'Limiters',
    '/ui/limiters',
    operator,
    html`<section><form class="filters" method="get" action="/ui/limiters">
<label>limiter key<input name="key" value="${query.key}" placeholder="partner-api"></label>
<label>client<input name="client" value="${query.client ?? ''}" placeholder="API key name (keys are per client unless shared)"></label>
<label>windows (comma-separated)<input name="rate" value="${query.rates.join(',')}" placeholder="100/1s,5000/1h"></label>
<label>API key rate<select name="apiKey"><option value="">no</option><option value="1" ${query.apiKey ? 'selected' : ''}>yes</option></select></label>
<button>Show</button></form></section>
${
  views === undefined
    ? ''
    : 'error' in views
      ? html`<div class="flash err">${views.error}</div>`
      : html`<section><h2>Windows of ${query.key}</h2>${
          views.length === 0
            ? html`<p class="muted">No state in Redis for this key (never used, or every window forgotten).</p>`
            : html`<table><tr><th>algorithm</th><th>window</th><th>value</th><th>used</th><th>remaining</th><th>reset</th></tr>${views.map(
                (w) =>
                  html`<tr><td>${w.algorithm}</td><td>${w.durationMs === null ? 'all' : humanSpan(w.durationMs)}</td><td class="n">${w.value ?? '–'}</td><td class="n">${w.used === null ? '–' : Math.round(w.used * 100) / 100}</td><td class="n">${w.remaining ?? '–'}</td><td>${at(w.resetAt)}</td></tr>`,
              )}</table>`
        }<p class="muted">Redis does not hold the windows' values (each request carries them): give them to see used and remaining.</p></section>`
}`,
  );
}

export function flash(message: string, error = false): Html {
  return html`<div class="flash ${error ? 'err' : ''}">${message}</div>`;
}

export { humanSize };
