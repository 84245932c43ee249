// Fairness at a saturated origin (issue 41; docs/architecture.md §6, "One order at a saturated
// origin"), end to end through HTTP: every request calls one local target (an arrival target in a
// process of its own), so the origin, not the workers, is the bottleneck.
//
//   node bench/origin-fairness.ts [--scenario hot,weights] [--executors 1|3|1,3]
//
// Scenarios (per topology):
//  - hot: one client; one partition with 4,000 tasks (50 ms calls) queued, the executors started
//    on it, then 50 single-task partitions posted once 50 hot calls were made; how many hot calls
//    reached the target before the last cold one (target: < 25 %).
//  - weights: keys of weight 3 and 1, 1,500 requests each (40 ms calls) queued while the executors
//    are stopped, then started; the origin's cap
//    MAX_WORKERS_PER_ORIGIN=8 counted across the executors (ORIGIN_CONCURRENCY_SCOPE=cluster); the
//    share of calls 200–1,000 at the target (target: 3 : 1 ± 15 %).
import { queueFromConfig } from '../packages/queue/src/index.ts';
import { startArrivalTarget } from '../packages/requester/test/e2e/arrival.fixture.ts';
import { dropStackDatabase, postRequest, stackKey } from '../packages/requester/test/e2e/stack.fixture.ts';
import { createRedis } from '../packages/shared/src/index.ts';
import { eventually, uniqueName } from '../packages/shared/src/testing/index.ts';
import { benchStackEnv, childProcesses, exitBench, loadavg, parseBenchArgs } from './harness.ts';
import { clusterService, type Service, splitService } from './service.ts';

const { values: args, fail } = parseBenchArgs({
  usage: `Fairness at a saturated origin (issue 41), end to end through HTTP: every request calls one
local target, so the origin is the bottleneck.

  node bench/origin-fairness.ts [--scenario hot,weights] [--executors 1|3|1,3]

  hot      one client: a partition of 4,000 tasks (50 ms calls) queued, executors started on it,
           then 50 single-task partitions posted after 50 hot calls; printed: the hot calls at
           the target before the last cold one (target: < 25 %)
  weights  keys of weight 3 and 1, 1,500 requests each (40 ms calls) queued, executors stopped,
           then started; MAX_WORKERS_PER_ORIGIN=8
           across the executors (ORIGIN_CONCURRENCY_SCOPE=cluster); printed: the calls 200-1,000
           at the target by key (target: 3 : 1 +/- 15 %)

As run for docs/benchmarks/fair-share.md:
  node bench/origin-fairness.ts --scenario hot,weights --executors 1,3`,
  options: {
    scenario: {
      type: 'string',
      default: 'hot,weights',
      value: 'hot|weights|hot,weights',
      help: 'what to measure',
    },
    executors: {
      type: 'string',
      default: '1',
      value: '1|3|1,3',
      help: 'topologies: 1 = --role ingress,sync-gateway,router,relay plus one executor; 3 = ./dev cluster (3 executors, a 3-master Redis Cluster)',
    },
    hot: { type: 'string', default: '4000', value: 'N', number: true, help: "the hot partition's tasks" },
    cold: { type: 'string', default: '50', value: 'N', number: true, help: 'single-task cold partitions' },
    each: { type: 'string', default: '1500', value: 'N', number: true, help: 'requests per key (weights)' },
    connections: { type: 'string', default: '32', value: 'N', number: true, help: 'connections posting' },
  },
});
const scenarios = args.scenario.split(',');
if (!scenarios.every((s) => s === 'hot' || s === 'weights'))
  fail(`--scenario: hot, weights, got ${args.scenario}`);
if (!args.executors.split(',').every((n) => n === '1' || n === '3'))
  fail(`--executors takes 1, 3 or 1,3, got ${args.executors}`);
const HOT = Number(args.hot);
const COLD = Number(args.cold);
const EACH = Number(args.each);
const CONNECTIONS = Number(args.connections);
const children = childProcesses();

type Key = Awaited<ReturnType<typeof stackKey>>;

/** Posts `requests` over CONNECTIONS connections, in their order; resolves once all are accepted. */
async function post(
  service: Service,
  requests: Array<{ key: Key; id: string; uri: string; partition?: string }>,
): Promise<void> {
  let next = 0;
  const poster = async () => {
    while (next < requests.length) {
      const { key, id, uri, partition } = requests[next++]!;
      const reply = await postRequest(`${service.httpUrl}/request`, {
        method: 'POST',
        headers: { ...key.headers, 'content-type': 'application/json' },
        body: JSON.stringify({
          request: { uri },
          meta: { requestId: id, ...(partition ? { partition } : {}) },
        }),
      });
      if (reply.status !== 202) throw new Error(`POST /request: ${reply.status}`);
      await reply.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, poster));
}

async function measure(executors: number, scenario: string): Promise<void> {
  const startedAt = Date.now();
  const load0 = loadavg();
  const target = await startArrivalTarget();
  const env: Record<string, string> = { LOG_LEVEL: 'warn' };
  if (scenario === 'weights')
    Object.assign(env, { MAX_WORKERS_PER_ORIGIN: '8', ORIGIN_CONCURRENCY_SCOPE: 'cluster' });
  const stack = await benchStackEnv(env);
  const service = executors === 1 ? await splitService(stack, children) : await clusterService(stack);
  const redis = createRedis({ url: service.config.redisUrl, cluster: service.config.redisCluster });
  const queue = queueFromConfig(service.config, redis, { notify: false });
  const run = uniqueName('of');
  const topology = executors === 1 ? '1 executor (split roles)' : '3 executors (`./dev cluster`)';
  try {
    let requests: Array<{ key: Key; id: string; uri: string; partition?: string }>;
    if (scenario === 'hot') {
      const key = await stackKey(stack);
      const hot = Array.from({ length: HOT }, (_, i) => ({
        key,
        id: `${run}-hot-${i}`,
        uri: `${target.url}/${run}-hot-${i}?delay=50`,
        partition: 'hot',
      }));
      const cold = Array.from({ length: COLD }, (_, i) => ({
        key,
        id: `${run}-cold-${i}`,
        uri: `${target.url}/${run}-cold-${i}?delay=50`,
        partition: `cold-${i}`,
      }));
      // The hot backlog queued while no executor runs; once the executors have started on it
      // (its tasks leased and waiting at the origin), the cold partitions come.
      await service.stopExecutors();
      await post(service, hot);
      await eventually(async () => (await queue.pendingDepth()) >= HOT, 900_000, 'hot queued');
      await service.startExecutors();
      await eventually(
        async () => (await target.arrivals()).filter((a) => a.path.includes(`${run}-hot-`)).length >= 50,
        900_000,
        'hot calls',
      );
      await post(service, cold);
      requests = [...hot, ...cold];
    } else {
      // Both backlogs queued while no executor runs, so that both clients wait from the start.
      await service.stopExecutors();
      const [heavy, light] = [await stackKey(stack, { weight: 3 }), await stackKey(stack)];
      // What `requester keys create --weight 3` does besides storing it with the key.
      await queue.setClientWeight(heavy.name, 3);
      const of = (key: Key, name: string) =>
        Array.from({ length: EACH }, (_, i) => ({
          key,
          id: `${run}-${name}-${i}`,
          uri: `${target.url}/${run}-${name}-${i}?delay=40`,
        }));
      const [h, l] = [of(heavy, 'heavy'), of(light, 'light')];
      requests = h.flatMap((x, i) => [x, l[i]!]);
      await post(service, requests);
    }
    const load1 = loadavg();
    if (scenario === 'weights') {
      await eventually(async () => (await queue.pendingDepth()) >= requests.length, 900_000, 'queued');
      await service.startExecutors();
    }
    const calls = async () =>
      (await target.arrivals()).filter((a) => a.path.startsWith(`/${run}-`)).sort((x, y) => x.at - y.at);
    console.log(`\n### ${scenario}, ${topology}`);
    if (scenario === 'hot') {
      let arrived: Awaited<ReturnType<typeof calls>> = [];
      await eventually(
        async () => {
          arrived = await calls();
          return arrived.filter((a) => a.path.includes('-cold-')).length >= COLD;
        },
        900_000,
        'cold calls',
      );
      const lastCold = arrived.findLastIndex((a) => a.path.includes('-cold-'));
      const hotBefore = arrived.slice(0, lastCold).filter((a) => a.path.includes('-hot-')).length;
      const firstCold = arrived.findIndex((a) => a.path.includes('-cold-'));
      console.log(
        `- hot calls before the last cold one: **${hotBefore.toLocaleString('en-US')} of ${HOT.toLocaleString('en-US')}** (${((100 * hotBefore) / HOT).toFixed(1)} %; target < 25 %: ${hotBefore < HOT / 4 ? 'met' : 'not met'}); before the first cold one: ${firstCold}`,
      );
    } else {
      let arrived: Awaited<ReturnType<typeof calls>> = [];
      await eventually(
        async () => {
          arrived = await calls();
          return arrived.length >= 1_000;
        },
        900_000,
        '1,000 calls',
      );
      const window = arrived.slice(200, 1_000);
      const heavy = window.filter((a) => a.path.includes('-heavy-')).length;
      const light = window.length - heavy;
      const ratio = heavy / Math.max(1, light);
      console.log(
        `- calls 200–1,000 at the target, weight 3 : weight 1: **${heavy} : ${light} = ${ratio.toFixed(2)} : 1** (target 3 : 1 ± 15 %: ${ratio >= 2.55 && ratio <= 3.45 ? 'met' : 'not met'})`,
      );
    }
    console.log(
      `- load average: ${load0} (start), ${load1} (queued), ${loadavg()} (end); wall ${((Date.now() - startedAt) / 1000).toFixed(0)} s`,
    );
  } finally {
    await queue.close();
    redis.disconnect();
    await service.shutdown();
    await target.close();
    await dropStackDatabase(stack);
  }
}

console.log(`origin fairness, ${new Date().toISOString()}, load average ${loadavg()}`);
for (const executors of args.executors.split(',').map(Number))
  for (const scenario of scenarios) await measure(executors, scenario);
await exitBench(0);
