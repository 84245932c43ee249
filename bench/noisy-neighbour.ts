// Noisy neighbour benchmark (issue 21, "Tenants: fair share"; docs/architecture.md §6), end to end
// through HTTP. Two API keys (two clients of the fair queue) and a fast target in a process of its
// own (arrival-target.fixture.ts: it notes when each call arrives and answers 200 at once).
//
//   pnpm run bench:noisy-neighbour -- [--executors 1,3] [--backlog 50000] [--connections 32]
//   node bench/noisy-neighbour.ts [--executors 1|3|1,3] [--backlog 50000] [--connections 32]
//        [--b-requests 10] [--b-every 100 (ms)] [--b-origin same|other|both] [--drain-limit 1800 (s)]
//
// Topologies: `--executors 1` is `requester --role ingress,sync-gateway,router,relay` plus one
// `requester --role executor` (the `--role all` process split in two, so that its executor can be
// stopped alone); `--executors 3` is the topology of `./dev cluster` (2 gateways, 2 routers, 3
// executors, 2 relays, a 3-master Redis Cluster).
//
// Per topology, in one run:
//  1. idle: client B sends its requests, one every 100 ms, to the idle service;
//  2. loaded: the executors are stopped; client A posts its backlog over 32 connections; once the
//     queue holds all of it (routed, pending), the executors are started again, and as soon as they
//     are ready B sends its requests as in 1.
// B's latency is from its POST to the call at the target (what fair share governs), and from its POST
// to its result on `out`. Printed as soon as B is measured: B's p50/p99/max idle and behind A's
// backlog, the difference of the p99s (issue 21's target: ≤ 1 s), and each of B's requests' steps
// in the task journal (where it waited); then A's drain rate and the load average.
//
// B's origin (`--b-origin`): `same` calls A's target, `other` a second target of its own (another
// port: another origin, so none of A's origin caps hold B), `both` alternates the two within each
// phase, so that both meet the same moments of A's drain and each gets a row; B's max wait at A's
// origin against its max wait elsewhere is issue 41's bound (same ≤ 2 × other).
import { queueFromConfig } from '../packages/queue/src/index.ts';
import { startArrivalTarget } from '../packages/requester/test/e2e/arrival.fixture.ts';
import {
  dropStackDatabase,
  postRequest,
  ResultCollector,
  stackKey,
} from '../packages/requester/test/e2e/stack.fixture.ts';
import { createRedis } from '../packages/shared/src/index.ts';
import { consumeEach, eventually, testKafka, uniqueName } from '../packages/shared/src/testing/index.ts';
import { benchStackEnv, childProcesses, exitBench, loadavg, parseBenchArgs } from './harness.ts';
import { clusterService, type Service, splitService } from './service.ts';

const { values: args, fail } = parseBenchArgs({
  usage: `Noisy neighbour benchmark (issue 21, "Tenants: fair share"; docs/architecture.md §6), end to end
through HTTP. Two API keys (two clients of the fair queue) and a fast target in a process of its own.

  pnpm run bench:noisy-neighbour -- [--executors 1,3] [--backlog 50000] [--connections 32]
  node bench/noisy-neighbour.ts [--executors 1|3|1,3] [--backlog 50000] [--connections 32]
       [--b-requests 10] [--b-every 100 (ms)] [--b-origin same|other|both] [--drain-limit 1800 (s)]

Per topology: 1. idle: client B sends its requests to the idle service; 2. loaded: the executors
are stopped, client A posts its backlog, and once it is queued the executors start again and B
sends its requests as in 1. Printed: B's p50/p99/max idle and behind A's backlog, the difference
of the p99s (target: <= 1 s), B's steps in the task journal, A's drain rate, the load average.
--b-origin both: B's requests alternate between A's origin and another one, a row each, and the
ratio of B's max waits for a call (target: same <= 2 x other).

As run for docs/benchmarks/fair-share.md:
  pnpm run bench:noisy-neighbour -- --executors 1 --backlog 50000`,
  options: {
    executors: {
      type: 'string',
      default: '1,3',
      value: '1|3|1,3',
      help: 'topologies: 1 = --role ingress,sync-gateway,router,relay plus one executor; 3 = ./dev cluster (2 gateways, 2 routers, 3 executors, 2 relays, a 3-master Redis Cluster)',
    },
    backlog: {
      type: 'string',
      default: '50000',
      value: 'N',
      number: true,
      help: "client A's backlog (requests)",
    },
    connections: {
      type: 'string',
      default: '32',
      value: 'N',
      number: true,
      help: 'connections A posts its backlog over',
    },
    'b-requests': {
      type: 'string',
      default: '10',
      value: 'N',
      number: true,
      help: "client B's requests per phase",
    },
    'b-every': { type: 'string', default: '100', value: 'MS', number: true, help: "ms between B's requests" },
    'b-origin': {
      type: 'string',
      default: 'same',
      value: 'same|other|both',
      help: "where B's requests go: A's target (same origin), a second target (other origin), or alternately both (a row each)",
    },
    'drain-limit': {
      type: 'string',
      default: '1800',
      value: 'S',
      number: true,
      help: "seconds to wait for A's backlog to drain after B's part (for its drain rate)",
    },
  },
});
if (!args.executors.split(',').every((n) => n === '1' || n === '3'))
  fail(`--executors takes 1, 3 or 1,3, got ${args.executors}`);
const B_ORIGIN = args['b-origin'];
if (B_ORIGIN !== 'same' && B_ORIGIN !== 'other' && B_ORIGIN !== 'both')
  fail(`--b-origin takes same, other or both, got ${B_ORIGIN}`);
const BACKLOG = Number(args.backlog);
const CONNECTIONS = Number(args.connections);
const B_REQUESTS = Number(args['b-requests']);
const B_EVERY_MS = Number(args['b-every']);
const DRAIN_LIMIT_MS = Number(args['drain-limit']) * 1000;
const children = childProcesses();

/** Epoch ms with a µs fraction: the clock the arrival target notes calls with. */
const now = () => performance.timeOrigin + performance.now();

/** Nearest-rank percentile (p99 of 10 samples is the largest). */
function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

/** When each of B's POSTs was sent (epoch ms), for the journal's report. */
const sentAt = new Map<string, number>();

type Origin = 'same' | 'other';
type Target = Awaited<ReturnType<typeof startArrivalTarget>>;

/** Which origin B's i-th request of a phase calls (see --b-origin). */
const originOf = (i: number): Origin =>
  B_ORIGIN === 'both' ? (i % 2 === 0 ? 'same' : 'other') : (B_ORIGIN as Origin);

interface BLatencies {
  /** The origin each request called, by index as in the lists below. */
  origin: Origin[];
  /** POST sent → 202 received (the ingress accept). */
  accept: number[];
  /** POST sent → the call at the target. */
  call: number[];
  /** POST sent → the result read from `out`. */
  out: number[];
  /** Instant of B's last call at the target. */
  lastCallAt: number;
}

/** B's requests, one every B_EVERY_MS (each sent at its instant, not after the previous answer). */
async function sendB(
  service: Service,
  key: Awaited<ReturnType<typeof stackKey>>,
  tag: string,
  results: ResultCollector,
  targets: Record<Origin, Target>,
): Promise<BLatencies> {
  const ids = Array.from({ length: B_REQUESTS }, (_, i) => `${tag}-${i}`);
  const origin = ids.map((_, i) => originOf(i));
  const acceptedAt = new Map<string, number>();
  const outAt = new Map<string, number>();
  const outs = ids.map((id) =>
    results
      .until(() => results.byId.has(id), 900_000, `result of ${id}`)
      .then(() => void outAt.set(id, now())),
  );
  const start = now();
  await Promise.all(
    ids.map(async (id, i) => {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + i * B_EVERY_MS - now())));
      sentAt.set(id, now());
      const reply = await postRequest(`${service.httpUrl}/request`, {
        method: 'POST',
        headers: { ...key.headers, 'content-type': 'application/json' },
        body: JSON.stringify({
          request: { uri: `${targets[origin[i] as Origin].url}/${id}` },
          meta: { requestId: id },
        }),
      });
      acceptedAt.set(id, now());
      if (reply.status !== 202) throw new Error(`B's POST /request: ${reply.status}`);
      await reply.arrayBuffer();
    }),
  );
  await Promise.all(outs);
  const callAt = new Map<string, number>();
  const arrivals = [...(await targets.same.arrivals())];
  if (targets.other !== targets.same) arrivals.push(...(await targets.other.arrivals()));
  for (const a of arrivals) {
    const id = a.path.slice(1);
    if (sentAt.has(id) && !callAt.has(id)) callAt.set(id, a.at);
  }
  const since = (at: Map<string, number>) =>
    ids.map((id) => (at.get(id) as number) - (sentAt.get(id) as number));
  return {
    origin,
    accept: since(acceptedAt),
    call: since(callAt),
    out: since(outAt),
    lastCallAt: Math.max(...callAt.values()),
  };
}

/** A journal event as this script reads it (packages/shared/src/journal/event.ts). */
interface Step {
  type: string;
  requestId: string;
  at: number;
  durationMs?: number;
  by?: string;
  executor?: string;
}

/**
 * The task journal's events of B's requests (the `events` topic, read from the start), to say where
 * B waited behind A: accepted → routed (ingress to `in`, the router), routed → leased (the queue's
 * lease order), leased → called (the executor: its workers and the origin's cap), each lease and
 * hold counted.
 */
class Journal {
  readonly steps = new Map<string, Step[]>();
  private readonly consumer = testKafka().consumer({ groupId: uniqueName('nn-journal') });
  private readonly prefix: string;
  constructor(prefix: string) {
    this.prefix = prefix;
  }

  start(topic: string): Promise<void> {
    return consumeEach(this.consumer, topic, (record) => {
      for (const event of [JSON.parse(record.value?.toString() ?? '[]') as Step | Step[]].flat()) {
        if (!event.requestId?.startsWith(this.prefix)) continue;
        this.steps.set(event.requestId, [...(this.steps.get(event.requestId) ?? []), event]);
      }
    });
  }

  /** One line per request: each step's instant after its POST (ms), leases and holds in order. */
  report(tag: string, sent: ReadonlyMap<string, number>): string[] {
    const rows: string[] = [];
    for (const [id, sentAt] of sent) {
      if (!id.startsWith(tag)) continue;
      const steps = [...(this.steps.get(id) ?? [])].sort((a, b) => a.at - b.at);
      const at = (s: Step) => Math.round((s.type === 'attempt' ? s.at - (s.durationMs ?? 0) : s.at) - sentAt);
      const text = steps
        .map(
          (s) =>
            `${s.type === 'attempt' ? 'called' : s.type}${s.by ? `(${s.by})` : ''}${s.executor ? `[${s.executor.slice(-12)}]` : ''} ${at(s)}`,
        )
        .join(', ');
      rows.push(`  ${id.slice(tag.length)}: ${text}`);
    }
    return rows;
  }

  stop(): Promise<void> {
    return this.consumer.stop();
  }
}

/** A's backlog: BACKLOG requests over CONNECTIONS connections; resolves once all are accepted. */
async function sendA(
  service: Service,
  key: Awaited<ReturnType<typeof stackKey>>,
  tag: string,
  targetUrl: string,
): Promise<void> {
  let next = 0;
  const poster = async () => {
    while (next < BACKLOG) {
      const id = `${tag}-${next++}`;
      const reply = await postRequest(`${service.httpUrl}/request`, {
        method: 'POST',
        headers: { ...key.headers, 'content-type': 'application/json' },
        body: JSON.stringify({ request: { uri: `${targetUrl}/${id}` }, meta: { requestId: id } }),
      });
      if (reply.status !== 202) throw new Error(`A's POST /request: ${reply.status}`);
      await reply.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, poster));
}

/** B's latencies of the requests that called `origin`. */
function only(b: BLatencies, origin: Origin): Pick<BLatencies, 'accept' | 'call' | 'out'> {
  const of = (xs: number[]) => xs.filter((_, i) => b.origin[i] === origin);
  return { accept: of(b.accept), call: of(b.call), out: of(b.out) };
}

const ms = (x: number) => Math.round(x).toLocaleString('en-US');
const trio = (xs: number[]) =>
  `${ms(percentile(xs, 50))} / ${ms(percentile(xs, 99))} / ${ms(Math.max(...xs))}`;

async function measure(executors: number): Promise<void> {
  const startedAt = now();
  const load0 = loadavg();
  const target = await startArrivalTarget();
  const targets = { same: target, other: B_ORIGIN === 'same' ? target : await startArrivalTarget() };
  const stack = await benchStackEnv({ LOG_LEVEL: 'warn' });
  const service = executors === 1 ? await splitService(stack, children) : await clusterService(stack);
  const results = new ResultCollector(stack.config.topicOut);
  const run = uniqueName('nn');
  const journal = new Journal(`${run}-B`);
  const redis = createRedis({ url: service.config.redisUrl, cluster: service.config.redisCluster });
  const queue = queueFromConfig(service.config, redis, { notify: false });
  try {
    await results.start();
    await journal.start(stack.config.topicEvents);
    const [a, b] = [await stackKey(stack), await stackKey(stack)];

    // 1. Idle. A first request warms each path (connections, JIT) and is not counted.
    await sendB(service, b, `${run}-warm`, results, targets).catch(() => undefined);
    const idle = await sendB(service, b, `${run}-Bidle`, results, targets);

    // 2. A's backlog queued while no executor runs, then B behind it.
    console.error(`${executors}: idle measured, posting A's backlog`);
    await service.stopExecutors();
    const before = results.byId.size;
    const postStart = now();
    await sendA(service, a, `${run}-A`, target.url);
    const posted = now();
    let depth = 0;
    await eventually(
      async () => {
        depth = await queue.pendingDepth();
        return depth >= BACKLOG;
      },
      900_000,
      `${BACKLOG} tasks queued`,
      () => `(${depth} queued)`,
    );
    const queuedAt = now();
    console.error(
      `${executors}: A queued in ${((queuedAt - postStart) / 1000).toFixed(0)} s, starting executors`,
    );
    const load1 = loadavg();
    await service.startExecutors();
    const readyAt = now();
    const [depthAtB, loaded] = await Promise.all([
      queue.pendingDepth(),
      sendB(service, b, `${run}-Bloaded`, results, targets),
    ]);
    const topology = executors === 1 ? '1 executor (split roles)' : '3 executors (`./dev cluster`)';
    console.log(
      `\n### ${topology}: backlog ${BACKLOG.toLocaleString('en-US')}, B ${B_REQUESTS} × every ${B_EVERY_MS} ms`,
    );
    console.log(
      '| B (ms) | accept p99 | POST → call at target p50 / p99 / max | POST → result on `out` p50 / p99 / max |',
    );
    console.log('|---|---:|---:|---:|');
    const origins: Origin[] = B_ORIGIN === 'both' ? ['same', 'other'] : [B_ORIGIN as Origin];
    for (const origin of origins) {
      const [i, l] = [only(idle, origin), only(loaded, origin)];
      const where = B_ORIGIN === 'both' ? `, ${origin} origin` : '';
      console.log(`| idle${where} | ${ms(percentile(i.accept, 99))} | ${trio(i.call)} | ${trio(i.out)} |`);
      console.log(
        `| behind A's backlog${where} | ${ms(percentile(l.accept, 99))} | ${trio(l.call)} | ${trio(l.out)} |`,
      );
      const dCall = percentile(l.call, 99) - percentile(i.call, 99);
      const dOut = percentile(l.out, 99) - percentile(i.out, 99);
      console.log(
        `| **p99 difference${where}** (target ≤ 1,000) | | **${ms(dCall)}** ${dCall <= 1_000 ? '(met)' : '(not met)'} | **${ms(dOut)}** ${dOut <= 1_000 ? '(met)' : '(not met)'} |`,
      );
    }
    if (B_ORIGIN === 'both') {
      const [same, other] = [Math.max(...only(loaded, 'same').call), Math.max(...only(loaded, 'other').call)];
      const ratio = same / other;
      console.log(
        `| **B's max wait for its call behind A, same / other origin** (target ≤ 2) | | **${ratio.toFixed(2)}** (${ms(same)} / ${ms(other)}) ${ratio <= 2 ? '(met)' : '(not met)'} | |`,
      );
    }
    console.log('');
    console.log(
      `- A posted ${BACKLOG.toLocaleString('en-US')} in ${((posted - postStart) / 1000).toFixed(1)} s (${ms(BACKLOG / ((posted - postStart) / 1000))}/s accepted), all queued ${((queuedAt - posted) / 1000).toFixed(1)} s later; executors ready ${((readyAt - queuedAt) / 1000).toFixed(1)} s after their start; pending at B's start ${depthAtB.toLocaleString('en-US')}`,
    );
    await eventually(
      () =>
        [...sentAt.keys()]
          .filter((id) => id.startsWith(`${run}-B`))
          .every((id) => journal.steps.get(id)?.some((s) => s.type === 'completed')),
      30_000,
      "B's journal",
    ).catch(() => console.log("  (some of B's journal events not read within 30 s)"));
    console.log(`- B's journal behind A's backlog (ms after each POST; leased[executor]):`);
    for (const row of journal.report(`${run}-Bloaded-`, sentAt)) console.log(row);
    console.log(`- B's journal idle:`);
    for (const row of journal.report(`${run}-Bidle-`, sentAt)) console.log(row);
    console.error(`${executors}: B measured, draining A`);
    // Bounded (--drain-limit): on a loaded machine the drain can take far longer than B's part; the
    // rate is then A's calls so far over the time since the executors' readiness.
    await results
      .until(() => results.byId.size >= before + BACKLOG + B_REQUESTS, DRAIN_LIMIT_MS, "A's results")
      .catch(() => undefined);
    const aCalls = (await target.arrivals())
      .filter((x) => x.path.startsWith(`/${run}-A-`))
      .map((x) => x.at)
      .sort((x, y) => x - y);
    const drainedAt = aCalls.length >= BACKLOG ? (aCalls[aCalls.length - 1] as number) : now();
    const aBeforeB = aCalls.filter((at) => at < loaded.lastCallAt).length;
    const load2 = loadavg();

    console.log(
      `- A's drain: ${ms(aCalls.length / ((drainedAt - readyAt) / 1000))} calls/s (${aCalls.length.toLocaleString('en-US')} calls in ${((drainedAt - readyAt) / 1000).toFixed(1)} s from the executors' readiness${aCalls.length < BACKLOG ? `, drain cut at --drain-limit` : ''}); ${aBeforeB.toLocaleString('en-US')} of A's calls came before B's last`,
    );
    console.log(
      `- load average: ${load0} (start), ${load1} (A queued), ${load2} (A drained); wall ${((now() - startedAt) / 1000).toFixed(0)} s`,
    );
  } finally {
    await journal.stop();
    await results.stop();
    await queue.close();
    redis.disconnect();
    await service.shutdown();
    await target.close();
    if (targets.other !== target) await targets.other.close();
    await dropStackDatabase(stack);
  }
}

console.log(`noisy neighbour, ${new Date().toISOString()}, load average ${loadavg()}`);
for (const executors of args.executors.split(',').map(Number)) {
  if (executors !== 1 && executors !== 3) throw new Error(`--executors: 1 or 3, not ${executors}`);
  await measure(executors);
}
await exitBench(0);
