// Hanging neighbour benchmark (docs/architecture.md, the executor's worker pool): one client's calls
// that never end must not keep another client's sync call waiting. Client A sends requests spread
// over loopback ports that accept a connection and never answer; once they hold the executor's
// workers, client B makes sync calls to a healthy target, one after the other.
import { createServer, type Server } from 'node:http';
import {
  postRequest,
  spawnRequester,
  stackKey,
  waitReady,
} from '../packages/requester/test/e2e/stack.fixture.ts';
import { uniqueName } from '../packages/shared/src/testing/index.ts';
import { benchStackEnv, childProcesses, envPairs, exitBench, loadavg, parseBenchArgs } from './harness.ts';

const { values: args, fail } = parseBenchArgs({
  usage: `Hanging neighbour benchmark: client A's calls hang at targets that never answer; client B's
sync calls to a healthy target are timed (POST → answer), idle first, then while A's calls hang.

  pnpm run bench:hanging-neighbour -- [--hanging 100] [--ports 10] [--b-calls 10] [--env K=V,...]
  node bench/hanging-neighbour.ts [options]

One process, \`requester --role all\` (MAX_WORKERS and the rest at their defaults unless --env sets
them). Printed: B's status codes (200: answered in the call; 202: held, the result comes later)
and latencies idle and beside A's hanging calls, with the load average.`,
  options: {
    hanging: {
      type: 'string',
      default: '100',
      value: 'N',
      number: true,
      help: "client A's requests, all hanging",
    },
    ports: {
      type: 'string',
      default: '10',
      value: 'N',
      number: true,
      help: 'loopback ports A calls (origins)',
    },
    'b-calls': {
      type: 'string',
      default: '10',
      value: 'N',
      number: true,
      help: "client B's sync calls per phase",
    },
    env: { type: 'string', value: 'K=V,...', help: 'extra environment for the Requester process' },
  },
});
const HANGING = Number(args.hanging);
const PORTS = Number(args.ports);
const B_CALLS = Number(args['b-calls']);
if (!(HANGING >= 1 && PORTS >= 1 && B_CALLS >= 1))
  fail('--hanging, --ports and --b-calls must be at least 1');
const children = childProcesses();

/** A server that takes every request and never answers: what a hung partner looks like. */
async function blackHole(): Promise<{ server: Server; url: string; arrived: () => number }> {
  let arrived = 0;
  const server = createServer(() => {
    arrived++;
  });
  server.keepAliveTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${port}`, arrived: () => arrived };
}

async function healthy(): Promise<{ server: Server; url: string }> {
  const server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${port}` };
}

function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

const holes = await Promise.all(Array.from({ length: PORTS }, blackHole));
const target = await healthy();
const stack = await benchStackEnv({ LOG_LEVEL: 'error', ...envPairs(args.env) });
const service = spawnRequester(stack, 'all');
children.push(service.child);
try {
  await waitReady(stack, 120_000);
  const [a, b] = [await stackKey(stack), await stackKey(stack)];
  const post = (key: { headers: Record<string, string> }, body: unknown) =>
    postRequest(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...key.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  const bPhase = async () => {
    const latencies: number[] = [];
    const statuses = new Map<number, number>();
    for (let i = 0; i < B_CALLS; i++) {
      const start = performance.now();
      const reply = await post(b, {
        request: { uri: `${target.url}/b` },
        meta: { requestId: uniqueName('b'), sync: true },
      });
      await reply.arrayBuffer();
      latencies.push(performance.now() - start);
      statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
    }
    return { latencies, statuses };
  };
  const report = (label: string, phase: Awaited<ReturnType<typeof bPhase>>) =>
    console.log(
      `| ${label} | ${[...phase.statuses].map(([s, n]) => `${n}× ${s}`).join(', ')} | ${percentile(phase.latencies, 50).toFixed(0)} | ${Math.max(...phase.latencies).toFixed(0)} |`,
    );

  await bPhase(); // warm-up: connections, caches, the compile of the first call's path
  const idle = await bPhase();
  for (let i = 0; i < HANGING; i++) {
    const hole = holes[i % PORTS];
    await post(a, { request: { uri: `${hole?.url}/a/${i}` }, meta: { requestId: uniqueName('a') } });
  }
  // Until A's calls stop arriving at the black holes: they hold what the executor gives them.
  let seen = -1;
  for (let still = 0; still < 5; ) {
    await new Promise((r) => setTimeout(r, 200));
    const now = holes.reduce((n, h) => n + h.arrived(), 0);
    still = now === seen && now > 0 ? still + 1 : 0;
    seen = now;
  }
  const loaded = await bPhase();
  console.log(
    `\nhanging neighbour: A ${HANGING} calls hanging over ${PORTS} origins (${seen} reached them); B ${B_CALLS} sync calls per phase`,
  );
  console.log('| B phase | statuses | p50 ms | max ms |');
  console.log('|---|---|---:|---:|');
  report('idle', idle);
  report('beside A’s hanging calls', loaded);
  console.log(`load average ${loadavg()}`);
} finally {
  service.child.kill('SIGKILL');
  await service.exited;
  for (const h of holes) h.server.closeAllConnections();
  await Promise.all(
    [...holes.map((h) => h.server), target.server].map((s) => new Promise((r) => s.close(r))),
  );
}
await exitBench(0);
