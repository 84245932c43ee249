// The service the fairness benchmarks drive: Requester's roles with an executor that can be
// stopped while a backlog is queued, and started again (bench/noisy-neighbour.ts,
// bench/origin-fairness.ts).
import type { ChildProcess } from 'node:child_process';
import { startClusterStack } from '../packages/requester/test/e2e/cluster-stack.fixture.ts';
import { type StackEnv, spawnRequester, waitReady } from '../packages/requester/test/e2e/stack.fixture.ts';
import type { Config } from '../packages/shared/src/index.ts';
import { freePort } from '../packages/shared/src/testing/index.ts';
import { stopOnSignal } from './harness.ts';

/** A running service whose executors can be stopped and started again. */
export interface Service {
  httpUrl: string;
  /** For the queue's pending depth (the cluster's own Redis with 3 executors). */
  config: Config;
  stopExecutors(): Promise<void>;
  /** Resolves once every executor answers /readyz. */
  startExecutors(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The `--role all` process split in two: everything but the executor, and one executor. */
export async function splitService(stack: StackEnv, children: ChildProcess[]): Promise<Service> {
  const rest = spawnRequester(stack, 'ingress,sync-gateway,router,relay');
  children.push(rest.child);
  await waitReady(stack, 120_000);
  let executor: ReturnType<typeof spawnRequester> | undefined;
  const service: Service = {
    httpUrl: stack.httpUrl,
    config: stack.config,
    async startExecutors() {
      // An admin port of its own (the rest of the roles hold the stack's).
      const adminPort = await freePort();
      const own = { ...stack, env: { ...stack.env, ADMIN_PORT: String(adminPort) } };
      executor = spawnRequester(own, 'executor');
      children.push(executor.child);
      await waitReady({ ...own, adminUrl: `http://127.0.0.1:${adminPort}` }, 120_000);
    },
    async stopExecutors() {
      executor?.child.kill('SIGTERM');
      await executor?.exited;
      executor = undefined;
    },
    async shutdown() {
      await service.stopExecutors();
      rest.child.kill('SIGTERM');
      await rest.exited;
    },
  };
  await service.startExecutors();
  return service;
}

/** The `./dev cluster` topology on the stack's topics, prefix and database. */
export async function clusterService(stack: StackEnv): Promise<Service> {
  const running = await startClusterStack(stack, { readyTimeoutMs: 400_000 });
  const unregister = stopOnSignal(() => running.shutdown('interrupted'));
  await waitReady(stack, 400_000);
  const { topology } = running;
  // byRole lists stopped processes too: the executors running now are these.
  let live = topology.byRole('executor');
  const count = live.length;
  return {
    httpUrl: stack.httpUrl,
    config: topology.config,
    async stopExecutors() {
      await Promise.all(live.map((p) => topology.terminate(p)));
      live = [];
    },
    async startExecutors() {
      live = await Promise.all(Array.from({ length: count }, () => topology.add('executor')));
    },
    async shutdown() {
      await running.shutdown('bench over');
      unregister();
    },
  };
}
