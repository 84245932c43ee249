import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { answerClientErrors } from '@requester/ingress';
import { gauge, registry } from '@requester/shared';
import { adminApp } from './app.ts';
import type { AdminConsole } from './console.ts';

export { AdminConsole, type AdminConsoleOptions, type JournalEvent, type Operator } from './console.ts';

/**
 * /readyz as a series, so that an alert sees a process that runs but is not ready (Prometheus
 * scrapes a pod whatever its readiness). Set at every scrape and every probe.
 */
const readyGauge = gauge(
  'ready',
  '1 when every dependency this process opened answers (what /readyz says), else 0',
);

export interface AdminProbes {
  /** Alive: the event loop answers. */
  live(): boolean;
  /** Ready: every role started and every dependency it opened answers. */
  ready(): Promise<{ ready: boolean; checks: Record<string, boolean> }>;
}

/**
 * The admin port of every process: `/healthz` (alive), `/readyz` (dependencies answer) and
 * `/metrics` (Prometheus); with a `console`, also the operator UI (`/ui`) and the admin API
 * (`/admin/api/…`, `/admin/openapi.json`), behind admin API keys (see app.ts). Kept apart from the
 * public HTTP API so probes, scrapes and operators never queue behind user traffic, and ingress
 * scaling is not the UI's concern.
 */
export async function startAdminServer(
  host: string,
  port: number,
  probes: AdminProbes,
  console?: AdminConsole,
): Promise<Server & { port: number }> {
  const operatorApp = console ? getRequestListener(adminApp(console).fetch) : undefined;
  const server = createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    try {
      if (operatorApp && (path === '/ui' || path.startsWith('/ui/') || path.startsWith('/admin/'))) {
        await operatorApp(req, res);
      } else if (path === '/healthz') {
        const alive = probes.live();
        res
          .writeHead(alive ? 200 : 503, { 'content-type': 'application/json' })
          .end(JSON.stringify({ alive }));
      } else if (path === '/readyz') {
        const state = await probes.ready();
        readyGauge.set(state.ready ? 1 : 0);
        res
          .writeHead(state.ready ? 200 : 503, { 'content-type': 'application/json' })
          .end(JSON.stringify(state));
      } else if (path === '/metrics') {
        readyGauge.set((await probes.ready()).ready ? 1 : 0);
        const body = await registry.metrics();
        res.writeHead(200, { 'content-type': registry.contentType }).end(body);
      } else {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: 'not found' }));
      }
    } catch (err) {
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(err) }));
    }
  });
  answerClientErrors(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return Object.assign(server, { port: (server.address() as AddressInfo).port });
}
