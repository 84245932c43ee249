import type { Logger } from '@requester/shared/log';
import type { Span } from '@requester/shared/tracing';
import type { Context } from 'hono';
import { routePath } from 'hono/route';
import type { Caller } from '../auth/index.ts';

/** What the API's middleware keep on a request's context (`c.get`). */
export type Env = {
  Variables: { requestId: string; logScope: LogScope; caller?: Caller; trace: ServerTrace };
};

/**
 * Who a request's log lines are about: the logger (the API's, then the serving role's), and once
 * known the task's requestId; with the x-request-id and the caller (see logBindings). No pino
 * child is made up front: most requests write the access line alone, which carries the bindings
 * as fields (pino writes them exactly as a child's), and four children per request (with their
 * redaction) cost ~7 % of an accept's CPU. A child is made for the first other line (see log).
 */
export interface LogScope {
  logger: Logger;
  requestId?: string;
  child?: Logger;
  /** The caller the child was made for: it is made again if one is set later. */
  childCaller?: Caller;
}

/** The SERVER span of one API request, started once its parent is known (see serverSpan). */
export interface ServerTrace {
  startTime: Date;
  span?: Span;
}

/** The route pattern (bounded label set), never the raw path. */
export function routeLabel(c: Context<Env>): string {
  const path = routePath(c, -1);
  return path === '/*' || path === '*' || path === '' ? 'unmatched' : path;
}
