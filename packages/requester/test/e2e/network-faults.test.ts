import { HELD_PER_WORKER } from '@requester/executor';
import { type KafkaProducer, loadConfig, ROLE_USES_REDIS, type RoleName } from '@requester/shared';
import {
  createTestTopics,
  type FaultProxy,
  freePort,
  kafkaRouteEnv,
  startFaultProxy,
  startTarget,
  type Target,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  dropStackDatabase,
  kafkaProducer,
  postRequest,
  ResultCollector,
  type StackEnv,
  spawnRequester,
  stackEnv,
  stackKey,
  unanswered,
} from './stack.fixture.ts';

/**
 * Network faults between Requester and one of its stores (docs/reliability.md): each role runs in
 * a process of its own (ingress, router, executor, relay), and every one of them reaches Redis,
 * PostgreSQL or Kafka through a TCP proxy the test controls (for Kafka their connections to the
 * broker are rerouted to the proxy, kafka-route.ts, since the broker advertises its own address).
 * While they work through a backlog (unordered calls, part posted to the ingress over HTTP and part
 * written to `in`, ordered partitions, tasks scheduled beyond the Redis horizon into the outbox,
 * and a trickle of posts that goes on through the faults) the link gets slow, stalls, is reset and
 * is partitioned, one fault after another. Then: every accepted task answered, each ordered
 * partition called in order at the target, repeated calls within the bound of docs/reliability.md,
 * each role's /readyz not ready during a stall or a partition of a store it uses (ready throughout
 * for a store it does not use) and ready after. Each fault lasts FAULT_SECONDS (3 in the suite;
 * the fault tier runs `FAULT_SECONDS=30 vitest run packages/requester/test/e2e/network-faults.test.ts`),
 * and the table of what happened is printed for docs/reliability.md.
 */
const FAULT_MS = Number(process.env.FAULT_SECONDS ?? 3) * 1_000;

interface Fault {
  name: string;
  apply(proxy: FaultProxy): void;
  /** Whether /readyz must say not ready while it lasts (a link that still answers, slowly, is ready). */
  unready: boolean;
}

const FAULTS: Fault[] = [
  { name: 'latency 300 ms', apply: (p) => p.latency(300), unready: false },
  { name: 'stall (accepts, never answers)', apply: (p) => p.stall(), unready: true },
  { name: 'reset of every connection', apply: (p) => p.reset(), unready: false },
  { name: 'partition (cut, refused)', apply: (p) => p.partition(), unready: true },
  { name: 'bandwidth 16 KiB/s', apply: (p) => p.bandwidth(16 * 1024), unready: false },
];

/** The roles, one process each: every role that reaches a store, the HTTP one included. */
const ROLES = ['ingress', 'router', 'executor', 'relay'] as const satisfies readonly RoleName[];

/**
 * Calls the executor may have made and not yet settled when a fault hits (its leases held at most):
 * a lost lease or a result not yet written repeats at most these, once per fault.
 */
const MAX_WORKERS = 4;
const REPEATS_PER_FAULT = HELD_PER_WORKER * MAX_WORKERS;

interface Row {
  store: string;
  fault: string;
  /** The roles whose /readyz said not ready at least once during the fault. */
  unready: string[];
  readyAfterMs: number;
  resultsDuring: number;
  /** Calls of a task made again, from the start of this fault to the start of the next. */
  repeated: number;
}

const rows: Row[] = [];
const summaries: string[] = [];

/** The last /readyz answer that was not ready: a wait that runs out names what was not. */
let lastUnready = '';

async function ready(adminUrl: string): Promise<boolean> {
  return fetch(`${adminUrl}/readyz`, { signal: AbortSignal.timeout(5_000) }).then(
    async (res) => {
      if (res.status === 200) return true;
      lastUnready = `${res.status} ${await res.text()}`;
      return false;
    },
    (err: Error) => {
      lastUnready = err.message;
      return false;
    },
  );
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (await check()) return Date.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what}: not within ${timeoutMs} ms (last /readyz: ${lastUnready})`);
}

/** How the child process is pointed at the proxy instead of the store. */
interface Store {
  store: string;
  /** `host:port` of the store, as the plain stack reaches it. */
  direct(config: StackEnv['config']): string;
  /** The environment that sends the child's connections to the store through `proxy`. */
  viaProxy(config: StackEnv['config'], proxy: FaultProxy): Record<string, string>;
  /** Whether the role keeps a client of the store, which its /readyz probes. */
  uses(role: RoleName): boolean;
}

/** A URL variable's host swapped for the proxy's. */
function urlVia(url: string, proxy: FaultProxy): string {
  const proxied = new URL(url);
  proxied.host = proxy.address;
  return proxied.toString();
}

const STORES: Store[] = [
  {
    store: 'Redis',
    direct: (c) => new URL(c.redisUrl).host,
    viaProxy: (c, proxy) => ({ REDIS_URL: urlVia(c.redisUrl, proxy) }),
    uses: (role) => ROLE_USES_REDIS[role],
  },
  {
    store: 'PostgreSQL',
    direct: (c) => new URL(c.databaseUrl).host,
    viaProxy: (c, proxy) => ({ DATABASE_URL: urlVia(c.databaseUrl, proxy) }),
    uses: () => true,
  },
  {
    store: 'Kafka',
    direct: (c) => c.kafkaBrokers.split(',')[0] as string,
    viaProxy: (c, proxy) => kafkaRouteEnv({ [c.kafkaBrokers.split(',')[0] as string]: proxy.address }),
    uses: () => true,
  },
];

/** Calls made again so far: each task's calls at the target beyond its first. */
function repeatedCalls(target: Target): number {
  const ids = new Set(target.calls.map((c) => new URL(c.path, 'http://t').searchParams.get('id')));
  return target.calls.length - ids.size;
}

describe('network faults between Requester and its stores, one process per role', () => {
  /** One proxy a store: every role reaches every store through its proxy, faulted one at a time. */
  const proxies = new Map<string, FaultProxy>();
  let stack: StackEnv;
  let target: Target;
  let results: ResultCollector;
  let producer: KafkaProducer;
  let headers: Record<string, string>;
  let processes: Array<{ role: RoleName; adminUrl: string; run: ReturnType<typeof spawnRequester> }> = [];

  beforeAll(async () => {
    target = await startTarget();
    const plain = await stackEnv();
    const env: Record<string, string> = {
      ...plain.env,
      MAX_WORKERS: String(MAX_WORKERS),
      EXECUTOR_LEASE_TTL: '3s',
      REDIS_COMMAND_TIMEOUT: '2s',
    };
    for (const { store, direct, viaProxy } of STORES) {
      const proxy = await startFaultProxy(withPort(direct(plain.config), store));
      proxies.set(store, proxy);
      Object.assign(env, viaProxy(plain.config, proxy));
    }
    stack = { ...plain, env, config: loadConfig(env) };
    // Started first: the roles take the longest to be ready, and what follows does not need them.
    processes = await Promise.all(
      ROLES.map(async (role) => {
        const adminPort = await freePort();
        const ports = {
          ADMIN_PORT: String(adminPort),
          HTTP_PORT: role === 'ingress' ? (env.HTTP_PORT as string) : String(await freePort()),
        };
        const run = spawnRequester({ ...stack, env: { ...env, ...ports } }, role);
        return { role, adminUrl: `http://127.0.0.1:${adminPort}`, run };
      }),
    );
    const { topicIn, topicOut, topicDlq, topicEvents } = plain.config;
    await createTestTopics([topicIn, topicOut, topicDlq, topicEvents], 3);
    // Straight to the store, not through a proxy: the test's own key, not a role's traffic.
    headers = { ...(await stackKey(plain)).headers, 'content-type': 'application/json' };
    results = new ResultCollector(topicOut);
    await results.start();
    producer = await kafkaProducer();
  }, 60_000);

  afterAll(async () => {
    // The checks are done: a graceful stop is another test's subject (main.test.ts), and waiting
    // for four of them would only lengthen the file.
    for (const p of processes) p.run.child.kill('SIGKILL');
    await Promise.all(processes.map((p) => p.run.exited));
    await producer?.disconnect();
    await results?.stop();
    await target?.close();
    for (const proxy of proxies.values()) await proxy.close();
    if (stack) await dropStackDatabase(stack);
    if (rows.length > 0) {
      const table = rows.map(
        (r) =>
          `| ${r.store} | ${r.fault} | ${r.unready.join(', ') || '—'} | ${r.resultsDuring} | ${r.repeated} | 0 | ${(r.readyAfterMs / 1000).toFixed(1)} s |`,
      );
      process.stdout.write(
        `\nnetwork faults (${FAULT_MS / 1000} s each, one process per role):\n${summaries.join('\n')}\n| store | fault | not ready during | results during | calls repeated | lost | every role ready again after |\n|---|---|---|---|---|---|---|\n${table.join('\n')}\n`,
      );
    }
  }, 60_000);

  it.each(STORES)(
    "$store: loses no accepted task, keeps ordered partitions in order, repeats within the bound, and each role's /readyz tells the fault",
    async ({ store, uses }) => {
      const proxy = proxies.get(store) as FaultProxy;
      /** This store's tasks: the tasks of the stores before it share the target and `out`. */
      const tag = store.toLowerCase();
      const allReady = async () =>
        (await Promise.all(processes.map((p) => ready(p.adminUrl)))).every(Boolean);
      let posting = true;
      let poster: Promise<void> = Promise.resolve();
      const repeatedAtStart = repeatedCalls(target);
      try {
        await waitFor(allReady, 60_000, 'every role ready at first');
        const now = Date.now();
        const records: Array<{ key: string; value: string }> = [];
        const ids: string[] = [];
        const uri = (path: string, id: string) =>
          `${target.url}${path}${path.includes('?') ? '&' : '?'}id=${id}`;
        const request = (id: string, path: string, meta: Record<string, unknown> = {}) => {
          ids.push(id);
          // Keyed as the contract asks (by meta.partition, else requestId): one ordered partition
          // is read from one Kafka partition, in the order it was written.
          records.push({
            key: typeof meta.partition === 'string' ? meta.partition : id,
            value: JSON.stringify({ request: { uri: uri(path, id) }, meta: { requestId: id, ...meta } }),
          });
        };
        const post = (id: string, path: string) =>
          postRequest(`${stack.httpUrl}/request`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ request: { uri: uri(path, id) }, meta: { requestId: id } }),
            signal: AbortSignal.timeout(10_000),
          });
        for (let i = 0; i < 40; i++) request(`${tag}-u-${i}`, `/slow/50?kind=u&n=${i}`);
        for (let p = 0; p < 3; p++)
          for (let i = 0; i < 15; i++)
            request(`${tag}-o-${p}-${i}`, `/slow/20?kind=o&s=${tag}&p=${p}&i=${i}`, {
              partition: `!o-${tag}-${p}`,
            });
        // Due after the Redis horizon (1 s): they wait in the PostgreSQL outbox, and the relay moves them.
        for (let i = 0; i < 10; i++)
          request(`${tag}-s-${i}`, `/echo?kind=s&n=${i}`, {
            scheduled: new Date(now + 2_000 + i * ((FAULTS.length * FAULT_MS) / 10)).toISOString(),
          });
        await producer.send(stack.config.topicIn, records);
        const replies = await Promise.all(
          Array.from({ length: 40 }, async (_, i) => {
            const id = `${tag}-h-${i}`;
            const reply = await post(id, `/slow/50?kind=h&n=${i}`);
            await reply.arrayBuffer();
            if (reply.status === 202) ids.push(id);
            return reply.status;
          }),
        );
        expect(replies.filter((status) => status !== 202)).toEqual([]);
        // Posts that go on through every fault, once each: a 202 is an accepted task, which must
        // be answered; a refusal (503 while a store is away) or no answer is not.
        poster = (async () => {
          for (let i = 0; posting; i++) {
            const id = `${tag}-t-${i}`;
            const reply = await fetch(`${stack.httpUrl}/request`, {
              method: 'POST',
              headers,
              body: JSON.stringify({ request: { uri: uri('/echo?kind=t', id) }, meta: { requestId: id } }),
              signal: AbortSignal.timeout(2_000),
            }).catch(() => undefined);
            if (reply?.status === 202) ids.push(id);
            await reply?.arrayBuffer().catch(() => {});
            await new Promise((resolve) => setTimeout(resolve, 250));
          }
        })();
        await results.until(
          () => ids.filter((id) => results.byId.has(id)).length >= 20,
          60_000,
          'the first 20 results',
        );

        const mine: Row[] = [];
        /** Calls repeated so far at the start of each fault. */
        const marks: number[] = [];
        for (const fault of FAULTS) {
          const before = results.byId.size;
          const repeatedBefore = repeatedCalls(target);
          fault.apply(proxy);
          const unready = new Set<string>();
          const faultEnds = Date.now() + FAULT_MS;
          // A probe of a stalled store answers after its own 2 s timeout: the fault ends on time,
          // and the probes asked during it are read once they answer.
          const probes: Array<Promise<void>> = [];
          while (Date.now() < faultEnds) {
            const round = Promise.all(
              processes.map(async (p) => {
                if (!(await ready(p.adminUrl))) unready.add(p.role);
              }),
            ).then(() => {});
            probes.push(round);
            await Promise.race([
              round,
              new Promise((resolve) => setTimeout(resolve, faultEnds - Date.now())),
            ]);
            await new Promise((resolve) => setTimeout(resolve, 200));
          }
          const resultsDuring = results.byId.size - before;
          proxy.heal();
          const [readyAfterMs] = await Promise.all([
            waitFor(allReady, 60_000, `every role ready after ${fault.name}`),
            Promise.all(probes),
          ]);
          marks.push(repeatedBefore);
          mine.push({
            store,
            fault: fault.name,
            unready: ROLES.filter((role) => unready.has(role)),
            readyAfterMs,
            resultsDuring,
            repeated: 0,
          });
          // A role without a client of this store has nothing to report: it stays ready.
          for (const role of ROLES.filter((r) => !uses(r)))
            expect(unready.has(role), `${role} /readyz during ${fault.name} of ${store}`).toBe(false);
          if (fault.unready)
            for (const role of ROLES.filter(uses))
              expect(unready.has(role), `${role} /readyz during ${fault.name} of ${store}`).toBe(true);
        }
        posting = false;
        await poster;

        await results.until(
          () => ids.every((id) => results.byId.has(id)),
          120_000,
          `all ${ids.length} results`,
        );
        marks.push(repeatedCalls(target));
        mine.forEach((row, k) => {
          row.repeated = (marks[k + 1] ?? 0) - (marks[k] ?? 0);
        });
        rows.push(...mine);
        expect(unanswered(results, ids)).toEqual({ missing: [], failed: [] });
        for (let p = 0; p < 3; p++) {
          const order = target.calls
            .filter((c) => c.path.includes(`kind=o&s=${tag}&p=${p}&`))
            .map((c) => Number(new URL(c.path, 'http://t').searchParams.get('i')));
          // Called in order: a task called again (at-least-once) may repeat its index, never go back.
          expect(
            order.every((i, k) => k === 0 || i >= (order[k - 1] ?? 0)),
            `partition ${p}: ${order}`,
          ).toBe(true);
          expect(new Set(order).size).toBe(15);
        }
        for (const row of mine)
          expect(row.repeated, `calls repeated after ${row.fault} of ${store}`).toBeLessThanOrEqual(
            REPEATS_PER_FAULT,
          );
        const answeredTwice = ids.filter((id) => (results.byId.get(id)?.length ?? 0) > 1).length;
        expect(answeredTwice).toBeLessThanOrEqual(FAULTS.length * REPEATS_PER_FAULT);
        summaries.push(
          `${store}: ${ids.length} accepted tasks (${ids.filter((id) => /-[ht]-/.test(id)).length} over HTTP), 0 lost, ${repeatedCalls(target) - repeatedAtStart} calls repeated, ${answeredTwice} answered more than once (bound ${REPEATS_PER_FAULT} a fault)`,
        );
        expect(proxy.accepted).toBeGreaterThan(0);
      } finally {
        posting = false;
        await poster.catch(() => {});
      }
    },
    120_000 + FAULTS.length * (FAULT_MS + 60_000),
  );
});

/** `host:port` with the store's default port when the URL left it out. */
function withPort(address: string, store: string): string {
  if (/:\d+$/.test(address)) return address;
  return `${address}:${store === 'Redis' ? 6379 : 5432}`;
}
