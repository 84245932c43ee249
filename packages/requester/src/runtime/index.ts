import type { Server } from 'node:http';
import {
  type Config,
  collectProcessMetrics,
  Dependencies,
  initTracing,
  type Logger,
  type RoleDefinition,
  type RoleHandle,
  type RoleName,
  shutdownTracing,
} from '@requester/shared';
import { AdminConsole, startAdminServer } from '../admin-server/index.ts';
import { type JournalHooks, journalHooks } from './journal.ts';
import { loadRole } from './roles.ts';

export interface RunningProcess {
  adminPort: number;
  /** Runs the three shutdown phases; resolves when everything is closed. */
  shutdown(reason: string): Promise<void>;
}

/**
 * Starts the given roles in one process, with the shared clients, the admin server and the
 * three-phase graceful shutdown of docs/architecture.md §5.
 */
export async function startProcess(
  roles: RoleName[],
  config: Config,
  logger: Logger,
  /**
   * The task journal's hooks of the operator UI (the request timeline, operator actions); by
   * default this process's journal (see journalHooks).
   */
  journal?: JournalHooks,
): Promise<RunningProcess> {
  collectProcessMetrics();
  initTracing(`requester-${roles.join('+')}`, config.otelEndpoint);
  const deps = new Dependencies(config, logger);
  const ownJournal = journalHooks(config, deps);
  const handles: Array<{ name: RoleName; handle: RoleHandle }> = [];
  let started = false;
  let stopping = false;

  const operatorConsole = new AdminConsole({
    config,
    deps,
    logger: logger.child({ component: 'admin' }),
    // The result of a request, when this process runs a sync-gateway (its cache of `out`).
    ...(roles.includes('sync-gateway')
      ? {
          peekResult: (requestId: string, client: string | undefined) =>
            peekResult(handles, requestId, client),
        }
      : {}),
    ...(journal ?? ownJournal.hooks),
  });
  const admin: Server & { port: number } = await startAdminServer(
    config.httpHost,
    config.adminPort,
    {
      live: () => true,
      ready: async () => {
        const checks = await deps.readiness();
        const ready = started && !stopping && Object.values(checks).every(Boolean);
        return { ready, checks: { ...checks, roles: started && !stopping } };
      },
    },
    operatorConsole,
  );

  const shutdown = async (reason: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ reason }, 'shutting down: 1/3 stop accepting');
    await settleAll(
      handles.map(({ name, handle }) => [name, handle.stopAccepting?.()]),
      logger,
    );
    logger.info('shutting down: 2/3 drain work in hand');
    await settleAll(
      handles.map(({ name, handle }) => [name, handle.drain()]),
      logger,
    );
    logger.info('shutting down: 3/3 close clients');
    await operatorConsole.close().catch((err: unknown) => logger.warn({ err }, 'admin console close failed'));
    await ownJournal.close().catch((err: unknown) => logger.warn({ err }, 'journal reader close failed'));
    await deps.close();
    await shutdownTracing();
    await new Promise<void>((resolve) => admin.close(() => resolve()));
    admin.closeAllConnections();
    logger.info('stopped');
  };

  try {
    for (const name of roles) {
      const definition: RoleDefinition = await loadRole(name);
      const handle = await definition.start({ config, logger: logger.child({ role: name }), deps });
      handles.push({ name, handle });
      logger.info({ role: name }, 'role started');
    }
    await deps.checkCredentials();
    started = true;
  } catch (err) {
    await shutdown('a role failed to start').catch(() => {});
    throw err;
  }
  return { adminPort: admin.port, shutdown };
}

function peekResult(
  handles: ReadonlyArray<{ handle: RoleHandle }>,
  requestId: string,
  client: string | undefined,
): string | undefined {
  for (const { handle } of handles) {
    const peek = (handle as { peekResult?: (id: string, client: string | undefined) => string | undefined })
      .peekResult;
    if (peek) return peek(requestId, client);
  }
  return undefined;
}

async function settleAll(steps: Array<[RoleName, Promise<void> | undefined]>, logger: Logger): Promise<void> {
  const results = await Promise.allSettled(steps.map(([, step]) => step));
  results.forEach((result, i) => {
    if (result.status === 'rejected')
      logger.error({ role: steps[i]?.[0], err: result.reason }, 'shutdown step failed');
  });
}
