import { html } from 'hono/html';
import { messageOf, page } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import { at, type Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { breakerText, type DestinationView, limiterText, listDestinations } from './index.ts';
import { type DestinationStatus, destinationStatus } from './status.ts';

/**
 * The Destinations page: every live destination at its current version (base URL, headers by
 * name, credential, limiter, retries, body limit, who made the version and when) and, for a write
 * key, a form to create one or make a new version (blank fields keep the current values) and a
 * Delete button per row. Each change is recorded (`destinations.<verb>`); a destination's name
 * links to its page, the journal of those changes.
 */
export const ui: UiFace = {
  nav: ['/ui/destinations', 'Destinations'],
  routes(app, console) {
    app.get('/ui/destinations', (c) => page(c, 'Destinations', destinationsBody(c.get('operator'))));
    app.get('/ui/destinations/live', async (c) => {
      const views = await listDestinations(await console.destinationStore()).catch(messageOf);
      const statuses =
        'error' in views
          ? []
          : await Promise.all(
              views.map((v) => destinationStatus(console.originParts(), v).catch(() => undefined)),
            );
      return c.html(destinationsTable(c.get('operator'), views, statuses));
    });
    app.get('/ui/destinations/:name', (c) =>
      page(c, `Destination ${c.req.param('name')}`, historyBody(c.req.param('name'), c.req.query('since'))),
    );
  },
};

function destinationsBody(operator: Operator): Html {
  return html`${operator.admin === 'write' ? destinationForm() : ''}
<section><h2>Destinations</h2><div id="destinations" hx-get="/ui/destinations/live" hx-trigger="load, refresh from:body" hx-swap="innerHTML"></div></section>`;
}

/** A destination's journal: its operator actions, drawn by the request page's timeline script. */
function historyBody(name: string, since: string | undefined): Html {
  const query = since ? `?since=${encodeURIComponent(since)}` : '';
  return html`<section><form class="filters" method="get"><label>since<input name="since" value="${since ?? ''}" size="24" placeholder="1h, 720h or RFC 3339"></label><button>Read</button></form>
<h2>Journal of <code>${name}</code></h2><p class="muted">Who created, updated (the version made), paused, resumed, recovered or deleted it (requester destinations history).</p>
<div id="timeline" data-events="/admin/api/destinations/${encodeURIComponent(name)}/history${query}">loading…</div></section>`;
}

function destinationForm(): Html {
  return html`<section><h2>Create, or a new version</h2>
<form class="filters" hx-target="#flash" data-action="destination-form" autocomplete="off">
<label>name<input name="name" size="20" placeholder="partner-billing" required></label>
<label>base URL<input name="baseUrl" size="34" placeholder="https://api.partner.example/v2"></label>
<label>headers<textarea name="headers" rows="2" cols="30" placeholder="X-Partner-Account: 1234"></textarea></label>
<label>credential<input name="credentials" size="16"></label>
<label>rate<input name="rate" size="10" placeholder="50/1s,1000/m"></label>
<label>algorithm<select name="algorithm"><option value="">token-bucket</option><option>leaky-bucket</option><option>fixed-window-counter</option><option>sliding-window-log</option><option>sliding-window-counter</option></select></label>
<label>attempts<input name="retryMax" size="4" placeholder="1"></label>
<label>max concurrency<input name="maxConcurrency" size="5"></label>
<label>timeout<input name="timeout" size="6" placeholder="10s"></label>
<label>max body bytes<input name="maxBodyBytes" size="8"></label>
<label>default deadline<input name="deadline" size="6" placeholder="5m"></label>
<label>breaker threshold<input name="breakerThreshold" size="4" placeholder="its own"></label>
<label>breaker open<input name="breakerOpen" size="6" placeholder="30s"></label>
<label>pacing<select name="pacing"><option value="">keep</option><option>on</option><option>off</option></select></label>
<button hx-post="/admin/api/destinations/create" data-action="create">Create</button>
<button hx-post="/admin/api/destinations/update" hx-confirm="Make a new version of this destination? Queued requests follow it from their next attempt." data-action="update">New version</button></form>
<p class="muted">Requests name a destination in <code>meta.destination</code> with a relative URI (<code>/invoices?x=1</code>). Its headers, credential (bound to the base URL's origin), rate limit (one quota for every caller), max concurrency, timeout, retries, breaker (a breaker threshold makes it a breaker of its own, apart from its origin's) and pacing apply; a caller may ask for fewer retries or a shorter timeout, never more. A new version keeps the fields left blank.</p></section>`;
}

function destinationsTable(
  operator: Operator,
  views: DestinationView[] | { error: string },
  statuses: Array<DestinationStatus | undefined>,
): Html {
  if ('error' in views) return html`<div class="flash err">${views.error}</div>`;
  if (views.length === 0) return html`<p class="muted">No destination yet.</p>`;
  const canAct = operator.admin === 'write';
  return html`<table><tr><th>name</th><th>version</th><th>base URL</th><th>headers</th><th>credential</th><th>limiter</th><th>attempts</th><th>concurrency</th><th>timeout</th><th>max body</th><th>deadline</th><th>breaker</th><th>pacing</th><th>since</th><th>by</th><th>now</th>${canAct ? html`<th></th>` : ''}</tr>${views.map(
    (v, i) =>
      html`<tr data-destination="${v.name}"><td><a href="/ui/destinations/${encodeURIComponent(v.name)}"><code>${v.name}</code></a></td><td>${v.version}</td><td><code>${v.baseUrl}</code></td><td>${[...Object.keys(v.headers ?? {}), ...(v.secretHeaderNames ?? []).map((n) => `${n} (secret)`)].join(', ') || '–'}</td><td>${v.credentials ?? '–'}</td><td>${limiterText(v.limiter, '–')}</td><td>${(v.retry as { max?: number } | undefined)?.max ?? 1}</td><td>${v.maxConcurrency ?? '–'}</td><td>${v.timeout ?? '–'}</td><td>${v.maxBodyBytes ?? '–'}</td><td>${v.deadline ?? '–'}</td><td>${breakerText(v.breaker)}</td><td>${v.pacing === false ? 'off' : 'on'}</td><td>${at(v.createdAt)}</td><td>${v.createdBy ?? '–'}</td><td>${statusText(statuses[i])}</td>${
        canAct
          ? html`<td><button class="small danger" hx-post="/admin/api/destinations/delete" hx-vals='${JSON.stringify({ name: v.name })}' hx-target="#flash" hx-confirm="Delete ${v.name}? Requests naming it are refused." data-action="delete">Delete</button></td>`
          : ''
      }</tr>`,
  )}</table>`;
}

/** The destination now, in a few words: its breaker (or its origin's), pace, pause, the calls of the last minutes. */
function statusText(status: DestinationStatus | undefined): string {
  if (!status) return '–';
  const { breaker, pause, calls, pace } = status.origin;
  const parts = [status.breaker ? `own breaker ${status.breaker.state}` : `breaker ${breaker.state}`];
  if (status.pacing && pace.rate !== null) parts.push(`paced ${pace.rate}/s`);
  if (status.pause) parts.push('paused');
  else if (pause) parts.push('its origin paused');
  if (calls.attempts > 0)
    parts.push(
      `${calls.attempts} calls in ${calls.windowMinutes}m, ${((calls.successRate ?? 0) * 100).toFixed(1)}% ok, p50 ${calls.p50Ms ?? '–'}ms`,
    );
  return parts.join('; ');
}
