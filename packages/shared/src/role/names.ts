/**
 * The role names and what each needs, apart from ./index.ts (the clients of every dependency):
 * the CLI's parsing and --help read them without loading kafkajs, ioredis or postgres.
 */

/** The roles one `requester` process can run (docs/architecture.md §3). */
export const ROLE_NAMES = ['ingress', 'sync-gateway', 'router', 'executor', 'relay'] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

/**
 * Whether each role opens an HTTP listener of its own (the admin port aside): N copies of such a
 * role in one `requester` would compete for its port, so only the others may run in several
 * processes (`--processes`); the HTTP roles scale with more `requester` processes.
 */
export const ROLE_LISTENS_ON_HTTP: Readonly<Record<RoleName, boolean>> = {
  ingress: true,
  'sync-gateway': true,
  router: false,
  executor: false,
  relay: false,
};

/** Whether each role works on Redis (the queue, the limiter, the caches): it starts once Redis answers. */
export const ROLE_USES_REDIS: Readonly<Record<RoleName, boolean>> = {
  ingress: true,
  'sync-gateway': true,
  router: true,
  executor: true,
  relay: false,
};
