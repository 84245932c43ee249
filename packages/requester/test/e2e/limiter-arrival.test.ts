import { ROLE_NAMES } from '@requester/shared';
import { redisServerAvailable, silentLogger, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningProcess, startProcess } from '../../src/runtime/index.ts';
import {
  type ArrivalTarget,
  busiestWindow,
  callsByExecutor,
  shortestSpan,
  startArrivalTarget,
} from './arrival.fixture.ts';
import { type ClusterStack, startClusterStack } from './cluster-stack.fixture.ts';
import {
  dropStackDatabase,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  waitReady,
} from './stack.fixture.ts';

/**
 * A limit holds where the target counts it (docs/architecture.md §9, issue 23 0b): 40 requests
 * under a `sliding-window-log` of 5 per 1 s, and no window of 1 s of the instants they reached a
 * real target (a process of its own) holds more than 5, whatever the gap between each executor's
 * decision and its send. On one process, and on the topology of `./dev cluster` (3 executors in
 * processes of their own, a Redis Cluster), where the calls must come from 2 executors or more.
 * Slowness is no failure here: the only assertion on time is the limit.
 */
const REQUESTS = 40;
const LIMIT = 5;
const WINDOW_MS = 1_000;

interface Topology {
  name: string;
  skip: boolean;
  /** Settings of this topology's stack beside the shared ones. */
  env?: Record<string, string>;
  start(stack: StackEnv): Promise<RunningProcess & Partial<Pick<ClusterStack, 'executorAdminUrls'>>>;
}

const topologies: Topology[] = [
  {
    name: 'one process',
    skip: false,
    start: (stack) => startProcess([...ROLE_NAMES], stack.config, silentLogger),
  },
  {
    name: 'the ./dev cluster topology (3 executors)',
    // Gated off before LIMITER_ARRIVAL_MARGIN (one full run in five saw 6 arrivals in a window: the
    // limit held by send time, the transit to the target varied); six arrivals now span ≥ 1,057 ms
    // here (5 runs, a CPU hog beside).
    skip: !redisServerAvailable(),
    // The margin is the deployment's transit variation, which the limit holds under (the setting's
    // own terms). Here a dozen processes share 2 cores with the rest of the suite: 50 ms, the
    // default, was exceeded once in six full runs (6 arrivals within 973 ms), a process scheduled
    // late between its send and the target's read. A deployment this crowded sets it so.
    env: { LIMITER_ARRIVAL_MARGIN: '150ms' },
    // Redis ports of its own: this file runs in the plain suite, beside E2E_TOPOLOGY=cluster files.
    // A second try: on a loaded machine a process may give up on the new Redis Cluster at start
    // ("None of startup nodes is available"); the topology then stops whole.
    start: (stack) =>
      startClusterStack(stack, { readyTimeoutMs: 400_000, redisFromPort: 7901 }).catch(() =>
        startClusterStack(stack, { readyTimeoutMs: 400_000, redisFromPort: 7901 }),
      ),
  },
];

describe.each(topologies)('a sliding-window-log limit at the target: $name', (topology) => {
  let stack: StackEnv;
  let running: (RunningProcess & Partial<Pick<ClusterStack, 'executorAdminUrls'>>) | undefined;
  let target: ArrivalTarget;
  let results: ResultCollector;
  let key: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    if (topology.skip) return;
    target = await startArrivalTarget();
    stack = await stackEnv({ MAX_WORKERS: '16', ...topology.env });
    running = await topology.start(stack);
    await waitReady(stack, 400_000);
    key = await stackKey(stack);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
  }, 900_000);

  afterAll(async () => {
    if (topology.skip) return;
    await results?.stop();
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 120_000);

  it.skipIf(topology.skip)(
    `${REQUESTS} requests at ${LIMIT} per ${WINDOW_MS} ms: no window of arrival times holds more than ${LIMIT}`,
    async () => {
      const run = uniqueName('arrive');
      const limiter = {
        key: run,
        algorithm: 'sliding-window-log',
        rates: [{ duration: `${WINDOW_MS}ms`, value: LIMIT }],
      };
      const ids = Array.from({ length: REQUESTS }, (_, i) => `${run}-${i}`);
      await Promise.all(
        ids.map(async (requestId) => {
          const reply = await fetch(`${stack.httpUrl}/request`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...key.headers },
            body: JSON.stringify({
              request: { uri: `${target.url}/${requestId}` },
              meta: { requestId, limiter },
            }),
          });
          expect(reply.status).toBe(202);
        }),
      );
      // 40 at 5 per second: 7 s at best; generous for a loaded machine.
      await results.until(() => ids.every((id) => results.byId.has(id)), 240_000, `${REQUESTS} results`);
      for (const id of ids) expect(results.byId.get(id)?.[0]).toMatchObject({ response: { status: 200 } });

      const arrivals = (await target.arrivals()).filter((a) => a.path.startsWith(`/${run}-`));
      expect(arrivals).toHaveLength(REQUESTS);
      const busiest = busiestWindow(
        arrivals.map((a) => a.at),
        WINDOW_MS,
      );
      const span = shortestSpan(
        arrivals.map((a) => a.at),
        LIMIT + 1,
      );
      console.info(
        `${topology.name}: busiest ${WINDOW_MS} ms window of arrivals: ${busiest} calls; ${LIMIT + 1} arrivals span ${span.toFixed(1)} ms at least`,
      );
      expect(busiest).toBeLessThanOrEqual(LIMIT);

      if (running?.executorAdminUrls) {
        const byExecutor = await callsByExecutor(running.executorAdminUrls, target.port);
        console.info(`${topology.name}: calls by executor ${byExecutor.join(', ')}`);
        expect(byExecutor.reduce((a, b) => a + b, 0)).toBe(REQUESTS);
        expect(byExecutor.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
      }
    },
    300_000,
  );
});
