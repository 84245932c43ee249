/**
 * The cost of one call through the executor's HTTP client (got, its keep-alive agents, the target
 * guard) against a bare undici `request` (keep-alive Agent), to the same local target; and, to
 * tell got's own floor from what the executor adds around it, `got-bare`: got with a keep-alive
 * agent and nothing else of the executor's (no guard, no timeouts, no hooks, no capped reading);
 * and `node-http`: `http.request` on that same kind of agent, the layer got is built on.
 *
 *   node packages/executor/bench/http-client-bench.ts [--calls 5000] [--concurrency 32] [--rounds 4]
 *
 * Each call's round trip is timed too; with `--concurrency 1` it is what each client adds to the
 * target's own time on loopback: how long a call holds its caller's slot beyond the target's work
 * (what the adaptive limit of docs/architecture.md §9 must cover with calls in flight).
 *
 * The target (the project's test target, `POST /echo`) runs in a child process, so the CPU measured
 * here (this process, all threads and the main thread alone) is the client's. Rounds alternate the
 * two clients, the order flipped each round, so that a shared machine's drift hits both alike; the
 * report ends with the ratios of the medians.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import path from 'node:path';
import { freePortRange, median, parseBenchArgs } from '@requester/shared/testing';
import got from 'got';
import { Agent, request } from 'undici';
import { createHttpClient } from '../src/http/index.ts';

const { values: args } = parseBenchArgs({
  usage: `The cost of one call through the executor's HTTP client (got, its keep-alive agents, the target
guard) against a bare undici request (keep-alive Agent), to the same local target; and got-bare
(got with a keep-alive agent and nothing else of the executor's) and node-http (http.request on
that same kind of agent), to tell got's own floor from what the executor adds around it.

  node packages/executor/bench/http-client-bench.ts [--calls 5000] [--concurrency 32] [--rounds 4]

Each call's round trip is timed (p50 / p99 of a round); with --concurrency 1, what each client adds
to the target's own time on loopback. The target runs in a child process, so the CPU measured here
is the client's. Rounds alternate
the clients, the order flipped each round; the report ends with the ratios of the medians.

As run for docs/benchmarks/executor.md:
  node packages/executor/bench/http-client-bench.ts --calls 5000 --rounds 4
  node packages/executor/bench/http-client-bench.ts --calls 2000 --concurrency 1 --rounds 4`,
  options: {
    calls: { type: 'string', default: '5000', value: 'N', number: true, help: 'calls per client per round' },
    concurrency: { type: 'string', default: '32', value: 'N', number: true, help: 'calls in flight at once' },
    rounds: { type: 'string', default: '4', value: 'N', number: true, help: 'rounds of every client' },
  },
});
const CALLS = Number(args.calls);
const CONCURRENCY = Number(args.concurrency);
const ROUNDS = Number(args.rounds);
const BODY = JSON.stringify({ hello: 'world', n: 42, text: 'x'.repeat(60) });

type Call = () => Promise<void>;
interface Result {
  client: string;
  callsPerSec: number;
  cpuUs: number;
  mainUs: number;
  /** Each call's round trip, ms: with --concurrency 1, what the client adds to the target's time. */
  p50Ms: number;
  p99Ms: number;
}

async function startTargetProcess(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePortRange(1);
  const serve = path.resolve(import.meta.dirname, '../../../k6/target/serve.ts');
  const child = spawn(process.execPath, [serve, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`target exited ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

async function measure(client: string, call: Call): Promise<Result> {
  let next = 0;
  const took = new Float64Array(CALLS);
  const loop = async () => {
    while (next < CALLS) {
      const i = next;
      next += 1;
      const start = performance.now();
      await call();
      took[i] = performance.now() - start;
    }
  };
  const cpu0 = process.cpuUsage();
  const main0 = process.threadCpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const main = process.threadCpuUsage(main0);
  return {
    client,
    callsPerSec: CALLS / seconds,
    cpuUs: (cpu.user + cpu.system) / CALLS,
    mainUs: (main.user + main.system) / CALLS,
    p50Ms: quantile(took, 0.5),
    p99Ms: quantile(took, 0.99),
  };
}

function quantile(values: Float64Array, q: number): number {
  const sorted = values.slice().sort();
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

const target = await startTargetProcess();
const uri = `${target.url}/echo`;
const headers = { 'content-type': 'application/json', 'idempotency-key': 'bench' };
const executorClient = createHttpClient({
  connectTimeoutMs: 5000,
  responseTimeoutMs: 10_000,
  maxResponseBytes: 1 << 20,
  followRedirects: false,
  allowPrivateTargets: ['127.0.0.1'],
});
const dispatcher = new Agent({ keepAliveTimeout: 60_000, connections: CONCURRENCY });
const bareAgent = new HttpAgent({ keepAlive: true, maxFreeSockets: 64 });
const bareGot = got.extend({ agent: { http: bareAgent }, retry: { limit: 0 }, throwHttpErrors: false });

const clients: Record<string, Call> = {
  got: async () => {
    const outcome = await executorClient.call({ method: 'POST', uri, headers, body: BODY });
    if (outcome.kind !== 'response' || outcome.status !== 200) throw new Error(JSON.stringify(outcome));
  },
  'got-bare': async () => {
    const res = await bareGot.post(uri, { headers, body: BODY });
    if (res.statusCode !== 200) throw new Error(`got-bare: ${res.statusCode}`);
  },
  'node-http': () =>
    new Promise<void>((resolve, reject) => {
      const req = httpRequest(uri, { method: 'POST', headers, agent: bareAgent }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(BODY);
    }),
  undici: async () => {
    const res = await request(uri, { method: 'POST', headers, body: BODY, dispatcher });
    await res.body.text();
    if (res.statusCode !== 200) throw new Error(`undici: ${res.statusCode}`);
  },
};

try {
  console.log(
    `${CALLS} calls per round, ${CONCURRENCY} in flight, ${ROUNDS} rounds, target in a child process`,
  );
  for (const call of Object.values(clients)) for (let i = 0; i < 500; i++) await call(); // warm-up
  const results: Result[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const names = Object.keys(clients);
    for (const name of round % 2 ? names : names.reverse()) {
      const r = await measure(name, clients[name] as Call);
      results.push(r);
      console.log(
        `round ${round} ${name.padEnd(9)} ${r.callsPerSec.toFixed(0)} calls/s, CPU/call ${r.cpuUs.toFixed(0)} µs ` +
          `(main thread ${r.mainUs.toFixed(0)} µs), round trip p50 ${r.p50Ms.toFixed(3)} / p99 ${r.p99Ms.toFixed(3)} ms`,
      );
    }
  }
  const of = (name: string, f: (r: Result) => number) =>
    median(results.filter((r) => r.client === name).map(f));
  for (const name of Object.keys(clients)) {
    console.log(
      `median ${name.padEnd(9)} ${of(name, (r) => r.callsPerSec).toFixed(0)} calls/s, CPU/call ` +
        `${of(name, (r) => r.cpuUs).toFixed(0)} µs (main thread ${of(name, (r) => r.mainUs).toFixed(0)} µs), ` +
        `round trip p50 ${of(name, (r) => r.p50Ms).toFixed(3)} / p99 ${of(name, (r) => r.p99Ms).toFixed(3)} ms`,
    );
  }
  for (const name of ['got', 'got-bare', 'node-http']) {
    const ratio = (f: (r: Result) => number) => (of(name, f) / of('undici', f)).toFixed(2);
    console.log(
      `ratio ${name}/undici: calls/s ${ratio((r) => r.callsPerSec)}, CPU/call ${ratio((r) => r.cpuUs)}, ` +
        `main thread ${ratio((r) => r.mainUs)}`,
    );
  }
} finally {
  executorClient.close();
  bareAgent.destroy();
  await dispatcher.close();
  target.child.kill('SIGINT');
}
