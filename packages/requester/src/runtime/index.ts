import type { Server } from 'node:http';
import {
  type Config,
  collectProcessMetrics,
  Dependencies,
  explainDependencyError,
  initTracing,
  type Logger,
  ROLE_USES_REDIS,
  type RoleHandle,
  type RoleName,
  shutdownTracing,
} from '@requester/shared';
import { settledWithin } from '@requester/shared/time';
import { AdminConsole, startAdminServer } from '../admin-server/index.ts';
import { type JournalHooks, journalHooks } from './journal.ts';
import { type RoleHandles, startRole } from './roles.ts';

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
  await initTracing(`requester-${roles.join('+')}`, config.otelEndpoint);
  const deps = new Dependencies(config, logger);
  const ownJournal = journalHooks(config, deps);
  const handles: Array<{ name: RoleName; handle: RoleHandle }> = [];
  const started: { [N in RoleName]?: RoleHandles[N] } = {};
  let running = false;
  let stopping = false;

  const operatorConsole = new AdminConsole({
    config,
    deps,
    logger: logger.child({ component: 'admin' }),
    // The result of a request, when this process runs a sync-gateway (its cache of `out`).
    ...(roles.includes('sync-gateway')
      ? {
          peekResult: (requestId: string, client: string | undefined) =>
            started['sync-gateway']?.peekResult(requestId, client),
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
        const ready = running && !stopping && Object.values(checks).every(Boolean);
        return { ready, checks: { ...checks, roles: running && !stopping } };
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
    // Every connection goes at once: a client polling /readyz on a keep-alive connection (a test,
    // a load balancer) would otherwise keep it busy, and close() would wait for it forever.
    const closed = new Promise<void>((resolve) => admin.close(() => resolve()));
    admin.closeAllConnections();
    await closed;
    logger.info('stopped');
  };

  let starting: RoleName | undefined;
  const start = async <N extends RoleName>(name: N): Promise<void> => {
    starting = name;
    const handle = await startRole(name, { config, logger: logger.child({ role: name }), deps });
    started[name] = handle;
    handles.push({ name, handle });
    logger.info({ role: name }, 'role started');
  };

  try {
    if (roles.some((name) => ROLE_USES_REDIS[name])) await deps.redisAnswers();
    for (const name of roles) await start(name);
    starting = undefined;
    await deps.checkCredentials();
    running = true;
  } catch (err) {
    // The cause first: the shutdown that follows may itself be slow or fail, and a process that
    // stops without saying why leaves its operator (or Kubernetes' events) nothing to go on.
    const why = explainDependencyError(err) ?? (err instanceof Error ? err.message : String(err));
    logger.error(
      { role: starting, err },
      `${starting ? `role ${starting}` : 'the process'} failed to start: ${why}`,
    );
    const stopped =
      (await settledWithin(shutdown('a role failed to start'), FAILED_START_SHUTDOWN_MS)) !== 'timeout';
    if (!stopped)
      logger.warn(
        { timeoutMs: FAILED_START_SHUTDOWN_MS },
        'shutdown after a failed start did not finish: exiting anyway',
      );
    throw err;
  }
  return { adminPort: admin.port, shutdown };
}

/**
 * How long a process whose roles failed to start spends closing what it opened before it exits:
 * it holds no work yet, and its supervisor (or Kubernetes) restarts it only once it is gone.
 */
const FAILED_START_SHUTDOWN_MS = 5_000;

async function settleAll(steps: Array<[RoleName, Promise<void> | undefined]>, logger: Logger): Promise<void> {
  const results = await Promise.allSettled(steps.map(([, step]) => step));
  results.forEach((result, i) => {
    if (result.status === 'rejected')
      logger.error({ role: steps[i]?.[0], err: result.reason }, 'shutdown step failed');
  });
}
