import { IncomingMessage } from 'node:http';
import type { Context } from 'hono';

/**
 * The request as Node parsed it, under Hono's Web `Request`. Behind `@hono/node-server` that
 * `Request` is a light wrapper that builds a Web `Headers` on the first header read, and a real
 * `Request` with a Web stream adapted from Node's on the first body (or `signal`) read; for an
 * accepted request that was ~6 % of its CPU. Read from Node's request instead when there is one
 * (the server); elsewhere (`app.request` in tests) the Web `Request` is all there is.
 */
export function nodeRequest(c: Context): IncomingMessage | undefined {
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming;
  return incoming instanceof IncomingMessage ? incoming : undefined;
}

/**
 * A request header as the Web `Headers.get` gives it: undefined when absent, repeated fields
 * joined with ", " (Node's `headers` keeps only the first of some, e.g. Authorization).
 * `name` is lower-case.
 */
export function requestHeader(c: Context, name: string): string | undefined {
  const incoming = nodeRequest(c);
  if (!incoming) return c.req.header(name);
  const raw = incoming.rawHeaders;
  let value: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const field = raw[i] as string;
    if (field.length !== name.length || field.toLowerCase() !== name) continue;
    const text = raw[i + 1] as string;
    value = value === undefined ? text : `${value}, ${text}`;
  }
  return value;
}
