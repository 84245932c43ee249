import type { RoleDefinition, RoleName } from '@requester/shared';

/**
 * Where each role lives. Loaded lazily so a process pays only for the roles it runs.
 */
const ROLE_LOADERS: Record<RoleName, () => Promise<RoleDefinition>> = {
  ingress: async () => (await import('@requester/ingress')).ingressRole,
  'sync-gateway': async () => (await import('@requester/ingress')).syncGatewayRole,
  router: routerWithBreaker,
  executor: async () => (await import('@requester/executor')).executorRole,
  relay: async () => (await import('@requester/relay')).relayRole,
};

/**
 * The router, with the executor's circuit breaker listing wired in for its breaker rule and the
 * `breaker_open*` gauges (the scheduler package cannot import the executor's: the executor
 * depends on the scheduler).
 */
async function routerWithBreaker(): Promise<RoleDefinition> {
  const [{ createRouterRole }, { breakerFromConfig }] = await Promise.all([
    import('@requester/scheduler'),
    import('@requester/executor/breaker'),
  ]);
  return createRouterRole({
    openOrigins: ({ config, deps }) => {
      const breaker = breakerFromConfig(config, deps.redis());
      return () => breaker.openOrigins();
    },
  });
}

export function loadRole(name: RoleName): Promise<RoleDefinition> {
  return ROLE_LOADERS[name]();
}
