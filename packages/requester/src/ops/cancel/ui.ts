import { html } from 'hono/html';
import type { Operator } from '../../admin-server/operator.ts';
import type { Html } from '../../ui/layout.ts';

/**
 * The request page's Cancel button (../requests/ui.ts; ./api.ts behind it): rendered for a write
 * key only; a read-only key's POST is refused (403) anyway. Cancel has no page of its own.
 */
export function cancelButton(operator: Operator, requestId: string, client: string): Html | '' {
  if (operator.admin !== 'write' || !requestId) return '';
  const vals = JSON.stringify(client ? { client } : {});
  return html`<section><h2>Cancel</h2><p class="muted">Its one result becomes <code>cancelled</code>; no attempt starts after this (one in flight finishes).</p>
<p><button hx-post="/admin/api/requests/${encodeURIComponent(requestId)}/cancel" hx-vals='${vals}' hx-target="#flash" hx-confirm="Cancel ${requestId}?" data-action="cancel">Cancel this request</button></p></section>`;
}
