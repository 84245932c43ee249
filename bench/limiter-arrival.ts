// Limiter arrival benchmark (docs/architecture.md §9 "counted where the target counts"): on the
// topology of `./dev cluster` (2 gateways, 2 routers, 3 executors, a 3-master Redis Cluster),
// bursts of requests under a `sliding-window-log` of 5 per 1 s reach a target in a process of its
// own, which notes when each arrives. Printed per run and budget: the busiest 1 s window of
// arrival instants and the shortest span of 6 consecutive arrivals (under 1,000 ms = the limit
// exceeded at the target), and the calls per executor.
//
//   node bench/limiter-arrival.ts [--runs 3] [--requests 40] [--budgets 0s,20s]
//
// A budget of 0s is the one-phase take (a call counted at the decision, the behaviour before
// LIMITER_DISPATCH_BUDGET); 20s the default two-phase take (counted by its send instant).
import {
  busiestWindow,
  callsByExecutor,
  shortestSpan,
  startArrivalTarget,
} from '../packages/requester/test/e2e/arrival.fixture.ts';
import { startClusterStack } from '../packages/requester/test/e2e/cluster-stack.fixture.ts';
import {
  dropStackDatabase,
  ResultCollector,
  stackKey,
  waitReady,
} from '../packages/requester/test/e2e/stack.fixture.ts';
import { uniqueName } from '../packages/shared/src/testing/index.ts';
import { benchStackEnv, exitBench, loadavg, parseBenchArgs } from './harness.ts';

const { values: args } = parseBenchArgs({
  usage: `Limiter arrival benchmark (docs/architecture.md §9): on the topology of ./dev cluster (2 gateways,
2 routers, 3 executors, a 3-master Redis Cluster), bursts of requests under a sliding-window-log
of 5 per 1 s reach a target that notes when each arrives. Printed per run and budget: the busiest
1 s window of arrivals, the shortest span of 6 consecutive arrivals (under 1,000 ms = the limit
exceeded at the target), and the calls per executor.

  node bench/limiter-arrival.ts [--runs 3] [--requests 40] [--budgets 0s,20s]

As run for docs/benchmarks/limiter.md:
  node bench/limiter-arrival.ts --runs 3`,
  options: {
    runs: { type: 'string', default: '3', value: 'N', number: true, help: 'bursts per budget' },
    requests: { type: 'string', default: '40', value: 'N', number: true, help: 'requests per burst' },
    budgets: {
      type: 'string',
      default: '0s,20s',
      value: 'LIST',
      help: 'LIMITER_DISPATCH_BUDGET values to compare: 0s = one-phase take (counted at the decision), 20s = two-phase (counted at its send)',
    },
  },
});
const RUNS = Number(args.runs);
const REQUESTS = Number(args.requests);
const LIMIT = 5;
const WINDOW_MS = 1_000;

async function measure(budget: string): Promise<void> {
  const target = await startArrivalTarget();
  const stack = await benchStackEnv({
    MAX_WORKERS: '16',
    LIMITER_DISPATCH_BUDGET: budget,
    LOG_LEVEL: 'warn',
  });
  const running = await startClusterStack(stack, { readyTimeoutMs: 400_000 });
  const results = new ResultCollector(stack.config.topicOut);
  try {
    await waitReady(stack, 400_000);
    const key = await stackKey(stack);
    await results.start();
    for (let run = 1; run <= RUNS; run++) {
      const name = uniqueName('arrive');
      const limiter = {
        key: name,
        algorithm: 'sliding-window-log',
        rates: [{ duration: '1s', value: LIMIT }],
      };
      const ids = Array.from({ length: REQUESTS }, (_, i) => `${name}-${i}`);
      const before = await callsByExecutor(running.executorAdminUrls, target.port);
      await Promise.all(
        ids.map((requestId) =>
          fetch(`${stack.httpUrl}/request`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...key.headers },
            body: JSON.stringify({
              request: { uri: `${target.url}/${requestId}` },
              meta: { requestId, limiter },
            }),
          }).then((r) => {
            if (r.status !== 202) throw new Error(`POST /request: ${r.status}`);
          }),
        ),
      );
      await results.until(() => ids.every((id) => results.byId.has(id)), 600_000, `${REQUESTS} results`);
      const at = (await target.arrivals()).filter((a) => a.path.startsWith(`/${name}-`)).map((a) => a.at);
      const after = await callsByExecutor(running.executorAdminUrls, target.port);
      console.log(
        `| ${budget} | ${run} | ${at.length} | ${busiestWindow(at, WINDOW_MS)} | ${shortestSpan(at, LIMIT + 1).toFixed(1)} | ${after.map((n, i) => n - before[i]!).join(' / ')} | ${loadavg()} |`,
      );
    }
  } finally {
    await results.stop();
    await running.shutdown('bench over');
    await target.close();
    await dropStackDatabase(stack);
  }
}

console.log(`${RUNS} runs of ${REQUESTS} requests, sliding-window-log ${LIMIT} per ${WINDOW_MS} ms`);
console.log(
  '| LIMITER_DISPATCH_BUDGET | run | arrivals | busiest 1 s window | shortest span of 6 (ms) | calls per executor | load average |',
);
console.log('|---|---|---|---|---|---|---|');
for (const budget of args.budgets.split(',')) await measure(budget);
await exitBench(0);
