import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { CredentialStore } from '@requester/shared/credentials';
import { DestinationCatalog, DestinationStore } from '@requester/shared/destinations';
import type { Dependencies, RoleContext } from '@requester/shared/role';
import { type ApiParts, createApi } from '../api/index.ts';
import { accessFromConfig } from '../auth/index.ts';
import { CredentialNames } from '../credentials/index.ts';
import { DestinationDoor } from '../destinations/index.ts';
import { bodyBytesPerKey, waitersPerKey } from '../fair/index.ts';
import { answerClientErrors } from './client-errors.ts';

/**
 * The one HTTP server of a process. When ingress and sync-gateway run together they must share
 * it (a sync `POST /request` needs the Hub), so each role *attaches* its part (`submit` or `hub`)
 * and the first one to attach starts the listener. Keyed by the process's `Dependencies`, so two
 * processes in one test file never see each other's server.
 */
export interface SharedServer {
  url: string;
  port: number;
  /**
   * Phase 1 of shutdown, shared by both roles (the first call closes, later calls wait for it):
   * stop listening, cut waits short (sync calls get 202 + Location, long-polls 404 pending),
   * let in-flight requests finish within a bound, then drop what is left.
   */
  close(): Promise<void>;
}

interface Entry {
  parts: ApiParts;
  started: Promise<SharedServer>;
}

const servers = new WeakMap<Dependencies, Entry>();

export async function attach(
  ctx: RoleContext,
  part: Pick<
    ApiParts,
    | 'submit'
    | 'claim'
    | 'cancel'
    | 'hub'
    | 'replyTo'
    | 'lookup'
    | 'ingressLog'
    | 'gatewayLog'
    | 'journal'
    | 'readJournal'
  >,
): Promise<SharedServer> {
  let entry = servers.get(ctx.deps);
  if (!entry) {
    const parts: ApiParts = {};
    const started = listen(ctx, parts);
    entry = { parts, started };
    servers.set(ctx.deps, entry);
    started.catch(() => servers.delete(ctx.deps));
  }
  // Attached before the listener can take a request (the first caller) or at once (the second).
  Object.assign(entry.parts, part);
  return entry.started;
}

async function listen(ctx: RoleContext, parts: ApiParts): Promise<SharedServer> {
  const { config, logger } = ctx;
  const app = createApi(
    parts,
    {
      maxBodyBytes: config.maxBodyBytes,
      maxBodyBytesInFlight: config.maxBodyBytesInFlight,
      maxBodyBytesInFlightPerKey: bodyBytesPerKey(config),
      maxWaitersPerKey: waitersPerKey(config),
      maxEventLookupsPerKey: config.eventsMaxLookupsPerKey,
      syncTimeoutMs: config.syncTimeout,
      longPollMaxMs: config.longPollMax,
      access: await accessFromConfig(ctx),
      credentialNames: new CredentialNames(
        async () => new CredentialStore(await ctx.deps.sql(), undefined).liveOrigins(),
        config.credentialsCacheTtl,
      ),
      destinations: new DestinationDoor(
        new DestinationCatalog(
          async (name) => new DestinationStore(await ctx.deps.sql()).get(name),
          config.credentialsCacheTtl,
        ),
        config.kafkaAnonymousCredentials,
      ),
    },
    logger,
  );
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  answerClientErrors(server);
  // Node's default (5 s) is shorter than most clients' and load balancers' idle timeouts: the
  // server would close connections they are about to reuse. Headers may take a moment longer.
  server.keepAliveTimeout = config.httpKeepAliveTimeout;
  server.headersTimeout = config.httpKeepAliveTimeout + 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.httpPort, config.httpHost, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = config.httpHost.includes(':') ? `[${config.httpHost}]` : config.httpHost;
  // In-flight requests are bounded by the produce timeout (waits are cut at close), so that plus
  // a margin is enough; never more than the whole shutdown budget.
  const boundMs = Math.min(config.shutdownTimeout, config.kafkaProduceTimeout + 1_000);
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= shut(server, parts, boundMs).finally(() => servers.delete(ctx.deps));
    return closing;
  };
  logger.info({ host: config.httpHost, port }, 'HTTP API listening');
  return { url: `http://${host}:${port}`, port, close };
}

async function shut(server: Server, parts: ApiParts, boundMs: number): Promise<void> {
  parts.closing = true;
  parts.hub?.releaseAll();
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, boundMs);
  });
  await Promise.race([closed, bound]);
  clearTimeout(timer);
  server.closeAllConnections();
  await closed;
}
