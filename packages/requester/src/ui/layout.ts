import { html } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { Operator } from '../admin-server/operator.ts';
import { humanTime } from '../ops/format.ts';

/**
 * The operator UI's frame: the layout every page is drawn in, the login page, the flash message.
 * The pages themselves are the features' `ui.ts` (ops/<feature>/), and the menu is their `nav`
 * (ops/index.ts). Server-rendered with Hono's `html` (every value escaped), htmx for the live
 * parts and the actions, uPlot for the chart; no build step, every asset served from
 * node_modules by the admin server (`/ui/assets/…`). Buttons that act are rendered only for a
 * write key; the API refuses a read key's actions anyway (403). Nothing is inline — no script, no
 * style, no style attribute — so the Content-Security-Policy of the admin port (app.ts) allows
 * only files of /ui/assets; htmx is told to evaluate no code and inject no style (htmx-config).
 */
export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/** The menu: each entry's path and label, in order. */
export type Nav = ReadonlyArray<readonly [href: string, label: string]>;

export function layout(
  title: string,
  path: string,
  operator: Operator | undefined,
  body: Html,
  nav: Nav = [],
): Html {
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
<header><b>Requester</b><nav>${nav.map(
    ([href, label]) => html`<a href="${href}" class="${href === path ? 'on' : ''}">${label}</a>`,
  )}</nav>${
    operator
      ? html`<span class="who">${operator.name} · ${operator.admin === 'write' ? 'admin' : 'read-only'}
<form method="post" action="/ui/logout" class="inline"><button class="small" id="logout">Log out</button></form></span>`
      : ''
  }</header>
<main><div id="flash"></div>${body}</main></body></html>`;
}

/** The login page (the menu shown, its pages redirect here until logged in). */
export function loginPage(nav: Nav, error?: string): Html {
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
    nav,
  );
}

/** An ISO time of a view, for people: `3m ago`, `in 2h`. */
export const at = (isoText: string | null | undefined) => humanTime(isoText ? Date.parse(isoText) : null);

export function flash(message: string, error = false): Html {
  return html`<div class="flash ${error ? 'err' : ''}">${message}</div>`;
}
