import { html } from 'hono/html';
import { page } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import { at, type Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { type KeyView, listKeys } from './index.ts';

/**
 * The Keys page: the live API keys with their scopes and, for a write key, a form to create one
 * (its token shown once, in the flash message, and never again) and Rotate (with a grace) and
 * Revoke on each row.
 */
export const ui: UiFace = {
  nav: ['/ui/keys', 'Keys'],
  routes(app, console) {
    app.get('/ui/keys', (c) => page(c, 'Keys', keysBody(c.get('operator'))));
    app.get('/ui/keys/live', async (c) =>
      c.html(keysTable(c.get('operator'), await listKeys((await console.keysParts()).store))),
    );
  },
};

function keysBody(operator: Operator): Html {
  return html`${
    operator.admin === 'write'
      ? html`<section><h2>Create a key</h2><form class="filters" hx-post="/admin/api/keys/create" hx-target="#flash" data-action="create-form">
<label>name<input name="name" placeholder="the client name" required></label>
<label>hosts<input name="hosts" placeholder="*.partner.example,api.x.com:8443 (blank: any)"></label>
<label>rate<input name="rate" size="8" placeholder="200/s"></label>
<label>weight<input name="weight" size="4" placeholder="1"></label>
<label>max in flight<input name="maxInFlight" size="4" placeholder="none"></label>
<label>default deadline<input name="deadline" size="6" placeholder="none (5m)"></label>
<label>credentials<input name="credentials" placeholder="comma-separated"></label>
<label>destinations<input name="destinations" placeholder="comma-separated (blank: any, and absolute URIs)"></label>
<label>admin<select name="admin"><option value="">none</option><option>read</option><option>write</option></select></label>
<label><input type="checkbox" name="sync"> sync</label>
<label><input type="checkbox" name="schedule"> schedule</label>
<label><input type="checkbox" name="kafkaEntry"> Kafka entry</label>
<label><input type="checkbox" name="virtualHosts"> virtual hosts (own Host header)</label>
<button data-action="create">Create</button></form>
<p class="muted">The token is shown once, here, and never again: it is stored as a hash only. Rotate gives a new token; the old one keeps working for the grace given.</p></section>`
      : ''
  }
<section><h2>Live keys</h2><div id="keys" hx-get="/ui/keys/live" hx-trigger="load, refresh from:body"></div></section>`;
}

/** The scope columns every key has, in order; any other field of a key's row gets a column after them. */
const SCOPES = [
  'hosts',
  'rate',
  'sync',
  'schedule',
  'admin',
  'kafkaEntry',
  'credentials',
  'weight',
  'maxInFlight',
] as const;
const NOT_SCOPES = new Set([
  'id',
  'name',
  'createdAt',
  'rotatedAt',
  'revokedAt',
  'previousExpiresAt',
  ...SCOPES,
]);

function cell(value: unknown): string {
  if (value === undefined || value === null) return '–';
  if (Array.isArray(value)) return value.join(', ');
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  return String(value);
}

const label = (field: string) => field.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`);

function keysTable(operator: Operator, keys: KeyView[]): Html {
  if (keys.length === 0) return html`<p class="muted">No live key.</p>`;
  const extra = [...new Set(keys.flatMap((k) => Object.keys(k)))].filter((f) => !NOT_SCOPES.has(f)).sort();
  const canAct = operator.admin === 'write';
  const defaults: Record<string, string> = {
    hosts: 'any',
    weight: '1',
    maxInFlight: 'none',
    maxBodyBytes: 'default',
  };
  return html`<table><tr><th>name</th><th>id</th>${[...SCOPES, ...extra].map((f) => html`<th>${label(f)}</th>`)}<th>created</th><th>rotated</th>${canAct ? html`<th></th>` : ''}</tr>${keys.map(
    (k) =>
      html`<tr data-key="${k.name}"><td>${k.name}</td><td><code>${k.id}</code></td>${[
        ...SCOPES,
        ...extra,
      ].map(
        (f) => html`<td>${k[f] === undefined && defaults[f] ? defaults[f] : cell(k[f])}</td>`,
      )}<td>${at(k.createdAt)}</td><td>${k.rotatedAt ? html`${at(k.rotatedAt)}${k.previousExpiresAt ? html`, old secret until ${at(k.previousExpiresAt)}` : ''}` : '–'}</td>${
        canAct
          ? html`<td><form class="inline" hx-post="/admin/api/keys/rotate" hx-target="#flash"><input type="hidden" name="key" value="${k.id}"><input name="grace" value="24h" size="4" title="how long the old secret keeps working"><button class="small" data-action="rotate">Rotate</button></form>
<button class="small" hx-post="/admin/api/keys/revoke" hx-vals='${JSON.stringify({ key: k.id })}' hx-target="#flash" hx-confirm="Revoke ${k.name}? Its requests are refused from now on." data-action="revoke">Revoke</button></td>`
          : ''
      }</tr>`,
  )}</table>`;
}
