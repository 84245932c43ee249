import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startFront } from '../../scripts/cluster/front.ts';
import { startTopology, type Topology } from '../../scripts/cluster/topology.ts';
import type { RunningProcess } from '../../src/runtime/index.ts';
import type { StackEnv } from './stack.fixture.ts';

/**
 * `E2E_TOPOLOGY=cluster`: a stack's "every role" is the scale-out topology of `./dev cluster`
 * (2 gateways, 2 routers, 3 executors, 2 relays in processes of their own, a 3-master Redis
 * Cluster, in with 12 partitions) on the stack's own topics, Redis prefix and database. Its front
 * listens on the stack's HTTP port and a second front on its admin port (the gateways' /readyz and
 * /metrics), so a test reads `httpUrl` and `adminUrl` as it does in-process.
 */
export const clusterTopology = process.env.E2E_TOPOLOGY === 'cluster';

/**
 * The running topology; `executorAdminUrls`: each executor's admin port (its /metrics); `topology`:
 * its processes, for a caller that stops and adds some (the noisy-neighbour bench's executors).
 */
export type ClusterStack = RunningProcess & { executorAdminUrls: string[]; topology: Topology };

/**
 * `readyTimeoutMs`: how long each process may take to be ready (the topology's default 120 s);
 * `redisFromPort`: the Redis Cluster's first port (7801), for a test that may run beside another
 * cluster stack.
 */
export async function startClusterStack(
  stack: StackEnv,
  options: { readyTimeoutMs?: number; redisFromPort?: number } = {},
): Promise<ClusterStack> {
  const runDir = mkdtempSync(path.join(tmpdir(), `rq-${stack.name}-`));
  // Ports, client id and Redis are the topology's, per process; partitions its default 12.
  const { HTTP_PORT, ADMIN_PORT, KAFKA_CLIENT_ID, REDIS_URL, KAFKA_TOPIC_PARTITIONS, ...env } = stack.env;
  // The admin front holds the stack's admin port from the start (see topology.ts: a port left
  // unbound for the topology's start-up can be taken meanwhile).
  const adminBackends: number[] = [];
  const admin = await startFront(adminBackends, Number(ADMIN_PORT));
  const topology = await startTopology({
    name: stack.name,
    runDir,
    // AUTH as the stack says (on by default): the tests' keys (stackKey) live in its database.
    env: { ...env, LOG_LEVEL: env.LOG_LEVEL === 'silent' ? 'warn' : (env.LOG_LEVEL ?? 'warn') },
    frontPort: Number(HTTP_PORT),
    redisFromPort: 7801,
    ...options,
  }).catch(async (err: unknown) => {
    await admin.close();
    throw err;
  });
  adminBackends.push(...topology.byRole('gateway').map((p) => Number(new URL(p.adminUrl).port)));
  return {
    adminPort: admin.port,
    executorAdminUrls: topology.byRole('executor').map((p) => p.adminUrl),
    topology,
    async shutdown() {
      await admin.close();
      await topology.stop();
      rmSync(runDir, { recursive: true, force: true });
    },
  };
}
