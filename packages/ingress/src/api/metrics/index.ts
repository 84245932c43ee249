import type { Logger } from '@requester/shared/log';
import { counter, histogram } from '@requester/shared/metrics';
import type { Context } from 'hono';
import { type Env, type LogScope, routeLabel } from '../context.ts';
import { logBindings } from '../log/index.ts';

const requests = counter('http_requests_total', 'HTTP requests answered by the API, by route and status', [
  'method',
  'route',
  'status',
]);
const latency = histogram('http_request_duration_seconds', 'HTTP API latency (sync waits included)', [
  'method',
  'route',
]);

/**
 * Per request: its count and latency by route, its access log line, and `Connection: close` once
 * shutdown began (`closing()`).
 */
export function observe(closing: () => boolean, logger: Logger) {
  return async (c: Context<Env>, next: () => Promise<void>): Promise<void> => {
    const started = performance.now();
    const scope: LogScope = { logger };
    c.set('logScope', scope);
    await next();
    if (closing()) c.header('Connection', 'close');
    const route = routeLabel(c);
    const seconds = (performance.now() - started) / 1000;
    const status = c.res.status;
    requests.inc({ method: c.req.method, route, status: String(status) });
    latency.observe({ method: c.req.method, route }, seconds);
    const level = status >= 500 ? 'warn' : 'info';
    if (!scope.logger.isLevelEnabled(level)) return;
    const line = { ...logBindings(c), method: c.req.method, route, status, ms: Math.round(seconds * 1000) };
    scope.logger[level](line, 'http request');
  };
}
