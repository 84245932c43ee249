// Weighted fair share during a rolling upgrade (docs/reliability.md, "Rolling upgrade"): do two
// backlogged clients of weights 3 and 1 still get ~3 : 1 of the calls at the target while the
// previous release's executors and this checkout's lease from one queue?
//
//   node bench/upgrade-share.ts [--rounds 4] [--window 10] [--settle 4] [--backlog 20000]
//        [--hold 100] [--workers 4] [--per-origin N] [--router old|new]
//
// The previous release (the CHANGELOG's newest, installed as the upgrade tier does it,
// release.fixture.ts) makes the stores and the keys: a (weight 3) and b (weight 1), both allowed
// Kafka entry. One router (of `--router`'s version) routes both backlogs, written straight to `in`
// interleaved a, b, a, b, … , into the queue before any executor runs; every request calls one
// counting target on 127.0.0.1 that answers after `--hold` ms, so two executors of `--workers`
// each serve 2 × workers / hold calls a second and the backlogs outlast the run. With
// `--per-origin` below `--workers` the origin's slots bound the calls instead, and each
// executor's wait for a slot (its slot line) decides the order after the lease. Then the
// executors go through the steps one process at a time, as a rollout and its rollback do:
//   old + old → old + new → new + new | new + new → new + old → old + old | old + old → …
// (a round is three windows; the next one measures where the last ended again, then goes back)
// each transition starting the incoming executor before stopping the outgoing one (SIGTERM). After
// `--settle` s, the calls reaching the target in the next `--window` s are counted per client and
// per version of the executor that made them (the caller of each connection, found from its
// socket in /proc). Printed per step: a : b and its ratio, the mixed steps' split by version; then
// per kind of step (old only, mixed, new only) the median and range of the ratios over the rounds,
// with the load average.

import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { queueFromConfig } from '../packages/queue/src/index.ts';
import { dropStackDatabase, kafkaProducer } from '../packages/requester/test/e2e/stack.fixture.ts';
import {
  CURRENT_BIN,
  installPreviousRelease,
  migrateWith,
  ROOT,
  type RoleProcess,
  startRole,
  storesOf,
} from '../packages/requester/test/upgrade/release.fixture.ts';
import { createRedis } from '../packages/shared/src/index.ts';
import { eventually, startCountingTarget, uniqueName } from '../packages/shared/src/testing/index.ts';
import {
  benchStackEnv,
  exitBench,
  loadavg,
  parseBenchArgs,
  pidListeningOn,
  stopOnSignal,
} from './harness.ts';

const { values: args, fail } = parseBenchArgs({
  usage: `Weighted fair share during a rolling upgrade: clients a (weight 3) and b (weight 1), both
backlogged, one counting target; two executors stepped one at a time through old + old, old + new,
new + new and back (old = the previous release, installed as the upgrade tier does; new = this
checkout). Per step: the calls at the target per client in a window, a : b, and in the mixed steps
which version made them; per kind of step the median and range over the rounds.

As run for docs/benchmarks/fair-share.md:
  node bench/upgrade-share.ts --rounds 4
  node bench/upgrade-share.ts --rounds 2 --per-origin 1 --window 20`,
  options: {
    rounds: {
      type: 'string',
      default: '4',
      value: 'N',
      number: true,
      help: 'rounds; each measures old only, mixed and new only (odd rounds forward, even ones back)',
    },
    window: { type: 'string', default: '10', value: 'S', number: true, help: 'seconds counted per step' },
    settle: {
      type: 'string',
      default: '4',
      value: 'S',
      number: true,
      help: 'seconds after a transition before the window opens',
    },
    backlog: {
      type: 'string',
      default: '20000',
      value: 'N',
      number: true,
      help: 'requests queued per client',
    },
    hold: { type: 'string', default: '100', value: 'MS', number: true, help: "the target's answer time" },
    workers: { type: 'string', default: '4', value: 'N', number: true, help: 'MAX_WORKERS of each executor' },
    'per-origin': {
      type: 'string',
      value: 'N',
      number: true,
      help: "MAX_WORKERS_PER_ORIGIN of each executor (default: --workers, so that the workers and the queue's lease, not the origin's slots, bound the calls; the product's default is a quarter of MAX_WORKERS); the adaptive limit off either way",
    },
    router: {
      type: 'string',
      default: 'old',
      value: 'old|new',
      help: "the router that queues the backlogs: old (the previous release's, as a rollout of executors first has it) or new",
    },
  },
});
if (args.router !== 'old' && args.router !== 'new') fail(`--router: old or new, got ${args.router}`);
const ROUNDS = Number(args.rounds);
const WINDOW_MS = Number(args.window) * 1000;
const SETTLE_MS = Number(args.settle) * 1000;
const BACKLOG = Number(args.backlog);
const HOLD_MS = Number(args.hold);
const CLIENTS = [
  { name: 'a', weight: 3 },
  { name: 'b', weight: 1 },
] as const;
const run = promisify(execFile);

type Version = 'old' | 'new';
interface Executor {
  version: Version;
  role: RoleProcess;
  pid: number;
}

/** The process holding the local end of a connection to `targetPort` from `port`, among `pids`. */
function callerOf(port: number, targetPort: number, pids: number[]): number | undefined {
  const hex = (p: number) => p.toString(16).toUpperCase().padStart(4, '0');
  let inode: string | undefined;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[1]?.endsWith(`:${hex(port)}`) && cols[2]?.endsWith(`:${hex(targetPort)}`)) inode = cols[9];
    }
  }
  if (!inode) return undefined;
  for (const pid of pids) {
    try {
      if (
        readdirSync(`/proc/${pid}/fd`).some(
          (fd) => readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`,
        )
      )
        return pid;
    } catch {}
  }
  return undefined;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((x, y) => x - y);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

const startedAt = Date.now();
console.log(`upgrade share, ${new Date().toISOString()}, load average ${loadavg()}`);
const work = mkdtempSync(path.join(ROOT, '.run', 'upgrade-share-'));
const running = new Set<RoleProcess>();
const stopAll = () => Promise.all([...running].map((role) => role.stop()));
const unregister = stopOnSignal(async () => {
  await stopAll();
  rmSync(work, { recursive: true, force: true });
});
let code = 0;
try {
  const release = await installPreviousRelease(path.join(work, 'release'));
  console.log(
    `previous release ${release.tag} (${release.commit.slice(0, 7)}), installed in ${(release.installMs / 1000).toFixed(1)} s`,
  );
  const stack = await benchStackEnv({
    LOG_LEVEL: 'warn',
    MAX_WORKERS: String(args.workers),
    MAX_WORKERS_PER_ORIGIN: String(args['per-origin'] ?? args.workers),
    // The cap above, not a limit learned from the loaded box's latency, bounds the calls.
    ADAPTIVE_CONCURRENCY: 'false',
    SHUTDOWN_TIMEOUT: '20s',
    KAFKA_SESSION_TIMEOUT: '6s',
  });
  // The stores as the previous release makes them, then this checkout's migrations (run first in a
  // rollout; the previous release runs on the new schema).
  await storesOf(release.bin, stack);
  await migrateWith(CURRENT_BIN, stack.env);
  for (const client of CLIENTS)
    await run(
      release.bin,
      ['keys', 'create', '--name', client.name, '--kafka-entry', '--weight', String(client.weight)],
      { env: { ...process.env, ...stack.env } },
    );

  const executors: Executor[] = [];
  const versionOf = new Map<number, Version>();
  const callers = new WeakMap<object, string>();
  let targetPort = 0;
  const target = await startCountingTarget(HOLD_MS, {
    countBy: (req: IncomingMessage, key: string) => {
      // An executor connects before its start returns and its pid is known: look again until found.
      let caller = callers.get(req.socket);
      if (caller === undefined) {
        const pid = callerOf(req.socket.remotePort ?? 0, targetPort, [...versionOf.keys()]);
        caller = pid === undefined ? undefined : versionOf.get(pid);
        if (caller) callers.set(req.socket, caller);
      }
      return `${key} ${caller ?? '?'}`;
    },
  });
  targetPort = target.port;
  let serial = 0;
  const start = async (version: Version): Promise<Executor> => {
    const role = await startRole({
      bin: version === 'old' ? release.bin : CURRENT_BIN,
      name: `${version === 'old' ? release.version : 'new'} executor-${++serial}`,
      roles: 'executor',
      env: stack.env,
      logDir: work,
    });
    running.add(role);
    const pid = pidListeningOn(Number(new URL(role.adminUrl).port));
    if (pid === undefined) throw new Error(`${role.name}: no process listens on ${role.adminUrl}`);
    versionOf.set(pid, version);
    const executor = { version, role, pid };
    executors.push(executor);
    return executor;
  };
  const stop = async (executor: Executor) => {
    await executor.role.stop();
    running.delete(executor.role);
    executors.splice(executors.indexOf(executor), 1);
  };

  const router = await startRole({
    bin: args.router === 'old' ? release.bin : CURRENT_BIN,
    name: `${args.router === 'old' ? release.version : 'new'} router`,
    roles: 'router',
    env: stack.env,
    logDir: work,
  });
  running.add(router);
  const producer = await kafkaProducer();
  const tag = uniqueName('us');
  for (let from = 0; from < BACKLOG; from += 500) {
    const messages = Array.from({ length: Math.min(500, BACKLOG - from) }, (_, j) =>
      CLIENTS.map(({ name }) => {
        const id = `${tag}-${name}-${from + j}`;
        return {
          key: id,
          value: JSON.stringify({
            request: { uri: `${target.url}/?key=${name}&i=${from + j}` },
            meta: { requestId: id, client: name },
          }),
        };
      }),
    ).flat();
    await producer.send(stack.config.topicIn, messages);
  }
  await producer.disconnect();
  const redis = createRedis({ url: stack.config.redisUrl, cluster: stack.config.redisCluster });
  const queue = queueFromConfig(stack.config, redis, { notify: false });
  await eventually(
    async () => (await queue.pendingDepth()) >= BACKLOG * CLIENTS.length,
    900_000,
    'both backlogs queued',
  );
  console.log(
    `${(BACKLOG * CLIENTS.length).toLocaleString('en-US')} tasks queued by the ${args.router} router in ${((Date.now() - startedAt) / 1000).toFixed(0)} s; load average ${loadavg()}`,
  );

  const counts = () => new Map(target.calls);
  const kinds = { old: 'old only', mixed: 'mixed', new: 'new only' } as const;
  type Kind = keyof typeof kinds;
  const ratios: Record<Kind, number[]> = { old: [], mixed: [], new: [] };
  const loads: string[] = [];
  const measure = async (round: number): Promise<void> => {
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const before = counts();
    const load = loadavg();
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    const after = counts();
    const delta = (label: string) => (after.get(label) ?? 0) - (before.get(label) ?? 0);
    const versions = executors.map((e) => e.version);
    const kind: Kind = versions.every((v) => v === 'old')
      ? 'old'
      : versions.every((v) => v === 'new')
        ? 'new'
        : 'mixed';
    const per = (client: string) => delta(`${client} old`) + delta(`${client} new`) + delta(`${client} ?`);
    const [a, b] = [per('a'), per('b')];
    const ratio = a / Math.max(1, b);
    ratios[kind].push(ratio);
    loads.push(load);
    const split =
      kind === 'mixed'
        ? `; old executor ${delta('a old')} : ${delta('b old')} (${(delta('a old') / Math.max(1, delta('b old'))).toFixed(2)}), new executor ${delta('a new')} : ${delta('b new')} (${(delta('a new') / Math.max(1, delta('b new'))).toFixed(2)})`
        : '';
    const unknown = delta('a ?') + delta('b ?');
    console.log(
      `| ${round} | ${versions.join(' + ')} | ${a} : ${b} | **${ratio.toFixed(2)}** | ${((a + b) / (WINDOW_MS / 1000)).toFixed(0)}/s${split}${unknown ? `; ${unknown} calls of no executor found` : ''} | ${load} |`,
    );
    for (const { name } of CLIENTS) {
      const served = [...after.entries()]
        .filter(([label]) => label.startsWith(`${name} `))
        .reduce((s, [, n]) => s + n, 0);
      if (served >= BACKLOG)
        throw new Error(`client ${name}'s backlog ran out (${served} of ${BACKLOG} called): raise --backlog`);
    }
  };

  console.log(
    `\n| round | executors | calls a : b in ${WINDOW_MS / 1000} s | ratio | rate; by version | load average |\n|---|---|---|---|---|---|`,
  );
  await start('old');
  await start('old');
  // Each transition brings one executor of the other version in, then stops one of the outgoing.
  const swap = async (from: Version, to: Version) => {
    await start(to);
    const out = executors.find((e) => e.version === from);
    if (out) await stop(out);
  };
  for (let round = 1; round <= ROUNDS; round++) {
    const [first, second]: [Version, Version] = round % 2 === 1 ? ['old', 'new'] : ['new', 'old'];
    // A round starts where the last one ended (its second version alone) and goes back.
    await measure(round);
    await swap(first, second);
    await measure(round);
    await swap(first, second);
    await measure(round);
  }
  console.log('');
  for (const kind of Object.keys(kinds) as Kind[]) {
    const xs = ratios[kind];
    console.log(
      `- ${kinds[kind]}: a : b median **${median(xs).toFixed(2)}** (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}, ${xs.length} windows)`,
    );
  }
  const errors = readdirSync(work)
    .filter((file) => file.endsWith('.log'))
    .flatMap((file) =>
      readFileSync(path.join(work, file), 'utf8')
        .split('\n')
        .filter((line) => /"level":"(error|fatal)"/.test(line))
        .map((line) => `${file}: ${line.slice(0, 200)}`),
    );
  console.log(
    `- load average per window: ${loads.map((l) => l.split(' ')[0]).join(', ')}; now ${loadavg()}; wall ${((Date.now() - startedAt) / 1000).toFixed(0)} s; error lines in the roles' logs: ${errors.length}`,
  );
  for (const line of errors.slice(0, 5)) console.log(`  ${line}`);
  await queue.close();
  redis.disconnect();
  await stopAll();
  await target.close();
  await dropStackDatabase(stack);
} catch (err) {
  console.error(err);
  code = 1;
} finally {
  await stopAll();
  unregister();
  // A failed run keeps the roles' logs to read.
  if (code === 0) rmSync(work, { recursive: true, force: true });
  else console.error(`the roles' logs are kept in ${work}`);
}
await exitBench(code);
