import { RequesterError, UsageError } from '@requester/shared';
import type { Context, Hono } from 'hono';
import { flash, type Html, layout, type Nav } from '../ui/layout.ts';
import type { Operator } from './operator.ts';

/**
 * What the features' `api.ts` and `ui.ts` faces (ops/<feature>/) share on the admin port: the
 * app they add routes to, their OpenAPI entries, and the reading of queries and bodies — each
 * bad parameter a UsageError that names it (answered 400 by app.ts).
 */
export type Env = { Variables: { operator: Operator; viaCookie: boolean; nav: Nav } };
export type AdminApp = Hono<Env>;
export type AdminContext = Context<Env>;

/** One operation of `/admin/openapi.json` (admin-server/openapi.ts writes the document). */
export interface OpenApiOp {
  summary: string;
  write?: boolean;
  /** Shows requests: secrets hidden unless `reveal=true` (a write key's journaled action). */
  reveal?: boolean;
  params?: string[];
  body?: Record<string, unknown>;
  pathId?: boolean;
}

/** The OpenAPI entries of a face, by path. */
export type OpenApiPaths = Record<string, Record<'get' | 'post', OpenApiOp | undefined>>;

/**
 * The operator, when the query asks to reveal secrets (`reveal=true`); a read key gets 403. With
 * the UI's session cookie a GET may not: another site's page on this host (an `<img>`, which sends
 * the cookie and no Origin) would record reveals in the operator's name. The UI reveals by a POST
 * (app.ts checks its origin); a Bearer key, which no page can make a browser send, may GET.
 */
export function revealTo(c: AdminContext): Operator | undefined {
  const text = c.req.query('reveal');
  if (text === undefined || text === '' || text === 'false' || text === '0') return undefined;
  if (text !== 'true' && text !== '1') throw new UsageError(`reveal must be true or false, got ${text}`);
  if (c.get('viaCookie') && c.req.method !== 'POST')
    throw new RequesterError(
      'forbidden',
      "reveal=true is not taken from a UI session by GET: use the request page's Show button, or the admin API with the key as Bearer",
    );
  return c.get('operator');
}

/** A page of the operator UI: its body in the layout, the menu entry of this path marked. */
export function page(c: AdminContext, title: string, body: Html): Response | Promise<Response> {
  return c.html(layout(title, c.req.path, c.get('operator'), body, c.get('nav')));
}

/** JSON for the API; for htmx a flash message, and a `refresh` event the live parts listen to. */
export function answer(c: AdminContext, value: unknown, message: string): Response {
  if (!c.req.header('hx-request')) return c.json(value);
  c.header('HX-Trigger', 'refresh');
  return c.html(flash(message)) as unknown as Response;
}

export type Body = Record<string, unknown>;

export async function bodyOf(c: AdminContext): Promise<Body> {
  if ((c.req.header('content-type') ?? '').startsWith('application/json'))
    return ((await c.req.json().catch(() => ({}))) ?? {}) as Body;
  return (await c.req.parseBody({ all: true })) as Body;
}

export function list(value: unknown): string[] {
  if (value === undefined || value === null || value === '') return [];
  return (Array.isArray(value) ? value : [value]).map(String).filter(Boolean);
}

export function stringOf(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function limitOf(text: string | undefined, fallback: number): number {
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new UsageError(`limit must be 1…10000, got ${text}`);
  return n;
}

/** `?client=`: whose requestId (requestIds are per client); blank = a request without a client. */
export function clientOf(text: string | undefined): string | undefined {
  return text?.trim() || undefined;
}

/** An error's message, for a page that shows it in place instead of failing. */
export function messageOf(err: unknown): { error: string } {
  return { error: err instanceof Error ? err.message : String(err) };
}
