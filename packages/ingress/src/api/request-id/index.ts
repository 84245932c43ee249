import { randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import { requestHeader } from '../../request/index.ts';
import type { Env } from '../context.ts';

/** Longest x-request-id taken from a caller (hono/request-id's default). */
const MAX_REQUEST_ID_HEADER = 255;

/**
 * x-request-id: the caller's correlation id (or a fresh one), echoed and put on every log line.
 * `hono/request-id` (same checks, same header) reading the header from Node's request: Hono's
 * `c.req.header` builds a Web `Headers` of the whole request for it (see ../../request).
 */
export function correlated() {
  return async (c: Context<Env>, next: () => Promise<void>): Promise<void> => {
    let id = requestHeader(c, 'x-request-id');
    if (!id || id.length > MAX_REQUEST_ID_HEADER || /[^\w\-=]/.test(id)) id = randomUUID();
    c.set('requestId', id);
    c.header('X-Request-Id', id);
    await next();
  };
}
