import { UsageError } from '@requester/shared';
import { html } from 'hono/html';
import { bodyOf, clientOf, page, revealTo, stringOf } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import { at, type Html } from '../../ui/layout.ts';
import { cancelButton } from '../cancel/ui.ts';
import type { DeadLetterView } from '../dlq/index.ts';
import type { UiFace } from '../faces.ts';
import { lookupRequest } from './index.ts';

export const ui: UiFace = {
  nav: ['/ui/requests', 'Request lookup'],
  routes(app, console) {
    app.get('/ui/requests', async (c) => {
      const id = c.req.query('id')?.trim() ?? '';
      const client = clientOf(c.req.query('client'));
      const reveal = revealTo(c);
      const data = id ? await lookupRequest(console, id, client, reveal) : undefined;
      return page(
        c,
        'Request lookup',
        requestBody(c.get('operator'), id, client ?? '', data, reveal !== undefined),
      );
    });
    // Show them: a POST (a write key's, same-origin, htmx: app.ts), never a link another site could load.
    app.post('/ui/requests/reveal', async (c) => {
      const body = await bodyOf(c);
      const id = stringOf(body.id)?.trim();
      if (!id) throw new UsageError('id: the requestId to show is required');
      const client = clientOf(stringOf(body.client));
      const operator = c.get('operator');
      const data = await lookupRequest(console, id, client, operator);
      return c.html(shown(operator, id, client ?? '', data, true));
    });
  },
};

type Lookup = { result: unknown; resultSource: string | null; deadLetters: DeadLetterView[] };

function requestBody(
  operator: Operator,
  id: string,
  client: string,
  data: Lookup | undefined,
  revealed = false,
): Html {
  return html`<section><form class="filters" method="get" action="/ui/requests"><label>requestId<input name="id" value="${id}" size="40"></label><label>client<input name="client" value="${client}" placeholder="API key name (requestIds are per client)"></label><button>Look up</button></form></section>
${
  data
    ? html`${shown(operator, id, client, data, revealed)}
${cancelButton(operator, id, client)}
<section><h2>Journal</h2><div id="timeline" data-events="/admin/api/requests/${encodeURIComponent(id)}/events">loading…</div></section>`
    : ''
}`;
}

/** What the look-up shows of the request (`#shown`, which Show them replaces by the same, revealed). */
function shown(operator: Operator, id: string, client: string, data: Lookup, revealed: boolean): Html {
  const canAct = operator.admin === 'write';
  const target = JSON.stringify({ id, ...(client ? { client } : {}) });
  const replay = { requestIds: [id], ...(client ? { client } : {}) };
  return html`<div id="shown"><section><p class="muted" id="secrets">${
    revealed
      ? html`<span class="warn">Shown in full: this look-up is journaled as yours.</span>`
      : html`Credentials (authorization, cookies, keys, tokens, URL passwords), bodies and proxyData are hidden.${
          canAct
            ? html` <button class="small" hx-post="/ui/requests/reveal" hx-vals='${target}' hx-target="#shown" hx-swap="outerHTML" data-action="reveal">Show them (journaled)</button>`
            : ''
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
  }</section></div>`;
}
