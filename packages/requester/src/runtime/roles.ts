import type { RoleDefinition, RoleName } from '@requester/shared';

/**
 * Where each role lives. Loaded lazily so a process pays only for the roles it runs.
 */
const ROLE_LOADERS: Record<RoleName, () => Promise<RoleDefinition>> = {
  ingress: async () => (await import('@requester/ingress')).ingressRole,
  'sync-gateway': async () => (await import('@requester/ingress')).syncGatewayRole,
  router: async () => (await import('@requester/scheduler')).routerRole,
  executor: async () => (await import('@requester/executor')).executorRole,
  relay: async () => (await import('@requester/relay')).relayRole,
};

export function loadRole(name: RoleName): Promise<RoleDefinition> {
  return ROLE_LOADERS[name]();
}
