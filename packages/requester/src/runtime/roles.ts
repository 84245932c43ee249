import type { SyncGatewayHandle } from '@requester/ingress';
import type { RoleContext, RoleDefinition, RoleHandle, RoleName } from '@requester/shared';

/** What each role's start returns: the roles the process asks more of than the shutdown phases. */
export interface RoleHandles extends Record<RoleName, RoleHandle> {
  'sync-gateway': SyncGatewayHandle;
}

/**
 * Where each role lives. Loaded lazily so a process pays only for the roles it runs.
 */
const ROLE_LOADERS: { [N in RoleName]: () => Promise<RoleDefinition<RoleHandles[N]>> } = {
  ingress: async () => (await import('@requester/ingress')).ingressRole,
  'sync-gateway': async () => (await import('@requester/ingress')).syncGatewayRole,
  router: async () => (await import('@requester/scheduler')).routerRole,
  executor: async () => (await import('@requester/executor')).executorRole,
  relay: async () => (await import('@requester/relay')).relayRole,
};

/** Loads role `name` and starts it. */
export async function startRole<N extends RoleName>(name: N, ctx: RoleContext): Promise<RoleHandles[N]> {
  const definition = await ROLE_LOADERS[name]();
  return definition.start(ctx);
}
