// Kafka restart benchmark (docs/benchmarks/kafka-restart.md): the drill of
// packages/requester/test/e2e/kafka-crash.test.ts (a private broker killed with kill -9 while 300
// slow tasks are in flight, left down 1.5 s, started again on the same data), timed per role from
// the instant the restarted broker's port accepts connections:
//   ready    a fresh client (no backoff behind it) appends a record: the broker serves again
//   join     the router's consumer of `in` joined its group again (its log line)
//   fetch    the executor's fetcher read `in` again (its log line)
//   fresh    the last result of 20 tasks produced to `in` by that fresh client (new work: it goes
//            through the router's consumer, so waits for its rejoin)
//   first / last  the first and the last result appended to `out` after the restart: the first is
//            the executor's result producer's first produce that went through (`out` is created
//            with message.timestamp.type=LogAppendTime: a record's timestamp is the broker's append,
//            not the producer's first attempt)
// With --baseline <checkout>, rounds alternate between this checkout's Requester and that one's.
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { kafkaProducer, sendSlowRequests, waitReady } from '../packages/requester/test/e2e/stack.fixture.ts';
import { createKafka, type KafkaRecord, type OutgoingRecord } from '../packages/shared/src/index.ts';
import {
  consumeEach,
  silentLogger,
  startPrivateKafka,
  startTarget,
} from '../packages/shared/src/testing/index.ts';
import {
  benchStackEnv,
  childProcesses,
  envPairs,
  exitBench,
  loadavg,
  parseBenchArgs,
  stopOnSignal,
} from './harness.ts';

const { values: args, fail } = parseBenchArgs({
  usage: `Kafka restart benchmark: the kafka-crash drill (kill -9 of a private broker with 300 slow
tasks in flight, 1.5 s down, restarted on the same data), timed per role from the instant the
restarted broker's port is open: first produce to out, the router's consumer rejoining its group,
the executor's fetcher reading in again, the first and the last result.

  pnpm run bench:kafka-restart -- [--rounds 3] [--tasks 300] [--baseline <checkout>] [--env K=V,...]
  node bench/kafka-restart.ts [options]

One private broker for the whole run (startPrivateKafka), a fresh stack (topics, Redis prefix,
database) and Requester process per round. With --baseline, rounds alternate between the two
checkouts (order flipped every round); medians and ranges per side, with the load average.`,
  options: {
    rounds: { type: 'string', default: '3', value: 'N', number: true, help: 'rounds per side' },
    tasks: { type: 'string', default: '300', value: 'N', number: true, help: 'tasks per round' },
    baseline: {
      type: 'string',
      value: 'DIR',
      help: 'a second checkout (node_modules installed) whose Requester alternates with this one',
    },
    env: { type: 'string', value: 'K=V,...', help: 'extra environment for the Requester processes' },
  },
});
const ROUNDS = Number(args.rounds);
const TASKS = Number(args.tasks);
if (!(ROUNDS >= 1 && TASKS >= 60)) fail('--rounds must be at least 1 and --tasks at least 60');
const children = childProcesses();

const broker = await startPrivateKafka();
const unregister = stopOnSignal(() => broker.stop());
const port = Number(broker.brokers.split(':')[1]);
const kafka = createKafka({ brokers: broker.brokers, clientId: 'kafka-restart', logger: silentLogger });
const target = await startTarget();
const producer = await kafkaProducer(kafka);

type Marks = { ready?: number; fresh?: number; join?: number; fetch?: number; first?: number; last?: number };
const sides: Array<{ name: string; root: string }> = [
  { name: 'this', root: path.resolve(import.meta.dirname, '..') },
];
if (args.baseline) sides.push({ name: 'baseline', root: path.resolve(args.baseline) });
const measured = new Map<string, Marks[]>(sides.map((s) => [s.name, []]));

/** Resolves with the instant a TCP connection to the broker's port is accepted (polled every 20 ms). */
async function portOpen(): Promise<number> {
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) return Date.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * The instant a fresh client (its own connections, no backoff behind it) first appends a record to
 * `topic`: when the restarted broker serves produce requests again, whatever the Requester's clients do.
 */
async function brokerServes(topic: string, records: OutgoingRecord[]): Promise<number> {
  for (;;) {
    const probe = createKafka({
      brokers: broker.brokers,
      clientId: 'kafka-restart-probe',
      logger: silentLogger,
    });
    const p = probe.producer();
    try {
      await p.connect();
      const [sent] = await p.send(topic, records, 1_000);
      if (sent) return Date.now();
    } catch {
    } finally {
      await p.disconnect().catch(() => {});
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The first log line (pino JSON, its `time`) at or after `since` whose message matches. */
function watchLog(child: ChildProcess) {
  const lines: Array<{ time: number; msg: string; component?: string; group?: string }> = [];
  const dump =
    process.env.E2E_LOG_DIR && createWriteStream(path.join(process.env.E2E_LOG_DIR, `${child.pid}.log`));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (dump) dump.write(`${line}\n`);
    try {
      lines.push(JSON.parse(line));
    } catch {}
  });
  return (since: number, match: (l: (typeof lines)[number]) => boolean) =>
    lines.find((l) => l.time >= since && match(l))?.time;
}

async function round(side: { name: string; root: string }): Promise<Marks> {
  const stack = await benchStackEnv({
    KAFKA_BROKERS: broker.brokers,
    MAX_WORKERS: '16',
    EXECUTOR_LEASE_TTL: '3s',
    LOG_LEVEL: 'info',
    ...envPairs(args.env),
  });
  const { topicIn, topicOut, topicDlq } = stack.config;
  const admin = kafka.admin();
  await admin.connect();
  await admin.ensureTopics([
    { topic: topicIn, numPartitions: 3, replicationFactor: 1 },
    {
      topic: topicOut,
      numPartitions: 3,
      replicationFactor: 1,
      configEntries: [{ name: 'message.timestamp.type', value: 'LogAppendTime' }],
    },
    { topic: topicDlq, numPartitions: 3, replicationFactor: 1 },
  ]);
  await admin.disconnect();
  const appended = new Map<string, number>();
  const reader = kafka.consumer({ groupId: `${topicOut}-reader` });
  await consumeEach(reader, topicOut, (record: KafkaRecord) => {
    const id = (JSON.parse(record.value?.toString() ?? '{}') as { meta?: { requestId?: string } }).meta
      ?.requestId;
    if (id && !appended.has(id)) appended.set(id, Number(record.timestamp));
  });
  const child = spawn(
    process.execPath,
    [path.join(side.root, 'packages/requester/src/main.ts'), '--role', 'all'],
    {
      env: { ...process.env, ...stack.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  children.push(child);
  const logged = watchLog(child);
  try {
    await waitReady(stack);
    const ids = await sendSlowRequests(producer, stack, {
      url: target.url,
      prefix: 'r',
      count: TASKS,
      slowMs: 100,
    });
    await until(() => appended.size >= 30, 60_000);
    await broker.kill();
    const killedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const opened = portOpen();
    await broker.restart();
    const t0 = await opened;
    const fresh = Array.from({ length: 20 }, (_, i) => `n-${i}`);
    const served = brokerServes(
      topicIn,
      fresh.map((id) => ({
        key: id,
        value: JSON.stringify({ request: { uri: `${target.url}/slow/100?fresh` }, meta: { requestId: id } }),
      })),
    );
    await until(() => [...ids, ...fresh].every((id) => appended.has(id)), 150_000);
    await new Promise((resolve) => setTimeout(resolve, 500)); // the log lines of the last moments
    const after = ids
      .map((id) => appended.get(id) ?? 0)
      .filter((t) => t > killedAt)
      .sort((a, b) => a - b);
    const rel = (t: number | undefined) => (t === undefined ? undefined : t - t0);
    if (process.env.KAFKA_RESTART_TRACE) {
      const buckets = new Map<number, number>();
      for (const t of [...appended.values()].sort((a, b) => a - b))
        buckets.set(Math.floor((t - t0) / 500), (buckets.get(Math.floor((t - t0) / 500)) ?? 0) + 1);
      console.error(
        `killed ${new Date(killedAt).toISOString()} port open ${new Date(t0).toISOString()}; results per 0.5 s from the port open: ${[...buckets].map(([b, n]) => `${b / 2}s:${n}`).join(' ')}`,
      );
    }
    return {
      ready: rel(await served),
      join: rel(
        logged(t0, (l) => /joined its group again/.test(l.msg) && /-router|router/.test(l.group ?? '')),
      ),
      fetch: rel(logged(t0, (l) => /fetcher reading again/.test(l.msg))),
      fresh: rel(Math.max(...fresh.map((id) => appended.get(id) ?? Number.NaN))),
      first: rel(after[0]),
      last: rel(after.at(-1)),
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)));
    await reader.stop().catch(() => {});
  }
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const fmt = (v: number | undefined) => (v === undefined ? '-' : `${(v / 1000).toFixed(2)}s`);
const KEYS = ['ready', 'fresh', 'join', 'fetch', 'first', 'last'] as const;
let code = 0;
try {
  console.log(`load average at start: ${loadavg()}`);
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) {
      const marks = await round(side);
      measured.get(side.name)?.push(marks);
      console.log(
        `round ${r + 1} ${side.name.padEnd(8)} ${KEYS.map((k) => `${k} ${fmt(marks[k])}`).join('  ')}  (load ${loadavg()})`,
      );
    }
  }
  console.log('\nfrom the restarted broker accepting connections: median [min – max]');
  for (const side of sides) {
    const all = measured.get(side.name) ?? [];
    const cells = KEYS.map((k) => {
      const xs = all
        .map((m) => m[k])
        .filter((x): x is number => x !== undefined)
        .sort((a, b) => a - b);
      if (xs.length === 0) return `${k} -`;
      return `${k} ${fmt(xs[Math.floor((xs.length - 1) / 2)])} [${fmt(xs[0])} – ${fmt(xs.at(-1))}]`;
    });
    console.log(`${side.name.padEnd(8)} ${cells.join('  ')}`);
  }
  console.log(`load average at end: ${loadavg()}`);
} catch (err) {
  console.error(err);
  code = 1;
} finally {
  await producer.disconnect().catch(() => {});
  await target.close();
  await broker.stop();
  unregister();
}
await exitBench(code);
