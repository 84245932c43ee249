import { html } from 'hono/html';
import { messageOf, page } from '../../admin-server/http.ts';
import type { Operator } from '../../admin-server/operator.ts';
import { at, type Html } from '../../ui/layout.ts';
import type { UiFace } from '../faces.ts';
import { type CredentialView, listCredentials } from './index.ts';

/**
 * The Credentials page: every credential (live and revoked) as name, kind, version and times —
 * never a secret, the store's summary neither (refreshed after each action), and the origins each
 * may be sent to. A write key also
 * gets the form to create or rotate one (signing key, OAuth2 client, proxy; mTLS takes PEM files:
 * the CLI) and a Revoke button per live credential. The form posts to the admin API; its secret
 * fields are password inputs, emptied once the post succeeded (app.js, `data-reset`), and no
 * answer echoes them: the flash names the credential and its version. Each action is recorded
 * (`credentials.<verb>`, the journal's admin_action).
 */
export const ui: UiFace = {
  nav: ['/ui/credentials', 'Credentials'],
  routes(app, console) {
    app.get('/ui/credentials', (c) => page(c, 'Credentials', credentialsBody(c.get('operator'))));
    app.get('/ui/credentials/live', async (c) => {
      const views = await listCredentials(await console.credentialStore(), true).catch(messageOf);
      return c.html(credentialsTable(c.get('operator'), views));
    });
  },
};

function credentialsBody(operator: Operator): Html {
  return html`${operator.admin === 'write' ? credentialForm() : ''}
<section><h2>Credentials</h2><div id="credentials" hx-get="/ui/credentials/live" hx-trigger="load, refresh from:body" hx-swap="innerHTML"></div></section>`;
}

function credentialForm(): Html {
  return html`<section><h2>Create or rotate</h2>
<form class="filters" hx-target="#flash" data-reset data-action="credential-form" autocomplete="off">
<label>name<input name="name" size="24" placeholder="partner-hooks"></label>
<label>origins<input name="origins" size="30" placeholder="https://api.partner.example,https://eu.partner.example:8443"></label>
<label>kind<select name="kind"><option value="signing">signing key</option><option value="oauth2">OAuth2 client</option><option value="proxy">proxy</option></select></label>
<label>signing secret<input name="signing" type="password" size="30" placeholder="whsec_… or hex:/base64:/text:…" autocomplete="new-password"></label>
<label>previous secret, still signing<input name="signingPrevious" type="password" size="30" placeholder="rotation: the old one (optional)" autocomplete="new-password"></label>
<label>token URL<input name="tokenUrl" size="30" placeholder="https://auth.partner.example/token"></label>
<label>client id<input name="clientId" size="16"></label>
<label>client secret<input name="clientSecret" type="password" size="20" autocomplete="new-password"></label>
<label>auth method<select name="authMethod"><option>client_secret_basic</option><option>client_secret_post</option></select></label>
<label>scope<input name="scope" size="12"></label>
<label>audience<input name="audience" size="12"></label>
<label>proxy URL<input name="proxy" type="password" size="30" placeholder="http://user:pass@proxy:3128" autocomplete="new-password"></label>
<button hx-post="/admin/api/credentials/create" data-action="create">Create</button>
<button hx-post="/admin/api/credentials/set-origins" hx-confirm="Replace the origins this credential may be sent to?" data-action="set-origins">Set origins</button>
<button hx-post="/admin/api/credentials/rotate" hx-confirm="Rotate this credential? Its new secrets replace the old ones everywhere within CREDENTIALS_CACHE_TTL." data-action="rotate">Rotate</button></form>
<p class="muted">A credential is sent only to its origins (<code>scheme://host[:port]</code>, comma-separated): a request naming it for any other target is refused. One without origins (created before they existed) is refused until they are set. Only the fields of the chosen kind are used. Secrets are sent once, sealed in PostgreSQL under the master key, and never shown again. A signing key is named by requests in <code>meta.signing.keyId</code>, other kinds in <code>meta.credentials</code>; an API key uses only those of its credentials scope. mTLS client certificates: <code>requester credentials create --cert-file … --key-file …</code>.</p></section>`;
}

function credentialsTable(operator: Operator, views: CredentialView[] | { error: string }): Html {
  if ('error' in views) return html`<div class="flash err">${views.error}</div>`;
  if (views.length === 0) return html`<p class="muted">No credential yet.</p>`;
  const canAct = operator.admin === 'write';
  return html`<table><tr><th>name</th><th>kind</th><th>version</th><th>master key</th><th>created</th><th>rotated</th><th>revoked</th><th>origins</th>${canAct ? html`<th></th>` : ''}</tr>${views.map(
    (v) =>
      html`<tr data-credential="${v.name}"><td><code>${v.name}</code></td><td>${v.kind}</td><td>${v.version}</td><td>${v.masterKeyId}</td><td>${at(v.createdAt)}</td><td>${at(v.rotatedAt)}</td><td>${at(v.revokedAt)}</td><td>${v.origins.length > 0 ? v.origins.join(', ') : 'none: refused until set'}</td>${
        canAct
          ? html`<td>${
              v.revokedAt
                ? ''
                : html`<button class="small danger" hx-post="/admin/api/credentials/revoke" hx-vals='${JSON.stringify({ name: v.name })}' hx-target="#flash" hx-confirm="Revoke ${v.name}? Requests naming it fail with credential_revoked." data-action="revoke">Revoke</button>`
            }</td>`
          : ''
      }</tr>`,
  )}</table>`;
}
