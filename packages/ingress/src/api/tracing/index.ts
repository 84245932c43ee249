import { firstTraceparent, type Span, SpanKind, SpanStatusCode, startSpan } from '@requester/shared/tracing';
import type { Context } from 'hono';
import { requestHeader } from '../../request/index.ts';
import { type Env, routeLabel } from '../context.ts';

/** A SERVER span per API request (HTTP semantic conventions), ended with the response. */
export function traced() {
  return async (c: Context<Env>, next: () => Promise<void>): Promise<void> => {
    c.set('trace', { startTime: new Date() });
    try {
      await next();
    } finally {
      const span = serverSpan(c);
      const status = c.res.status;
      span.updateName(`${c.req.method} ${routeLabel(c)}`);
      span.setAttribute('http.route', routeLabel(c));
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    }
  };
}

/**
 * The request's SERVER span, started (back-dated to the request's arrival) on first use: its
 * parent is the caller's `traceparent` header, else `bodyTraceparent` (`meta.traceparent`), which
 * is only known once the body is read.
 */
export function serverSpan(c: Context<Env>, bodyTraceparent?: string): Span {
  const trace = c.get('trace');
  trace.span ??= startSpan(
    `${c.req.method} ${routeLabel(c)}`,
    firstTraceparent(requestHeader(c, 'traceparent'), bodyTraceparent),
    {
      kind: SpanKind.SERVER,
      startTime: trace.startTime,
      attributes: {
        'http.request.method': c.req.method,
        'url.path': c.req.path,
        'url.scheme': c.req.url.slice(0, c.req.url.indexOf(':')).toLowerCase(),
      },
    },
  );
  return trace.span;
}
