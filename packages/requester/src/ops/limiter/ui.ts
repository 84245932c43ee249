import { html } from 'hono/html';
import { messageOf, page } from '../../admin-server/http.ts';
import { at, type Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { humanSpan } from '../format.ts';
import { type LimiterQuery, limiterQuery, showLimiterOf } from './api.ts';
import { type LimiterView, spanOf } from './index.ts';

export const ui: UiFace = {
  nav: ['/ui/limiters', 'Limiters'],
  routes(app, console) {
    app.get('/ui/limiters', async (c) => {
      const query = limiterQuery(c.req.query());
      const views = query.key
        ? await showLimiterOf(console, query)
            .then((r) => r.views)
            .catch(messageOf)
        : undefined;
      return page(c, 'Limiters', limitersBody(query, views));
    });
  },
};

function limitersBody(query: LimiterQuery, views: LimiterView[] | { error: string } | undefined): Html {
  return html`<section><form class="filters" method="get" action="/ui/limiters">
<label>limiter key<input name="key" value="${query.key}" placeholder="partner-api"></label>
<label>client<input name="client" value="${query.client ?? ''}" placeholder="API key name (keys are per client unless shared)"></label>
<label>windows (comma-separated)<input name="rate" value="${query.rates.join(',')}" placeholder="100/1s,5000/1h"></label>
<label>quota value<input name="quota" value="${query.quota}" placeholder="1000000"></label>
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
                  html`<tr><td>${w.algorithm}</td><td>${spanOf(w, humanSpan)}</td><td class="n">${w.value ?? '–'}</td><td class="n">${w.used === null ? '–' : Math.round(w.used * 100) / 100}</td><td class="n">${w.remaining ?? '–'}</td><td>${at(w.resetAt)}</td></tr>`,
              )}</table>`
        }<p class="muted">Redis does not hold the windows' or the quota's values (each request carries them): give them to see used and remaining.</p></section>`
}`;
}
