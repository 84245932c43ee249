// Kafka restart benchmark (docs/benchmarks/kafka-restart.md): the drill of
// packages/requester/test/e2e/kafka-crash.test.ts (a private broker killed with kill -9 while 300
// slow tasks are in flight, left down --down ms, started again on the same data), timed from the
// instant the restarted broker's port accepts connections:
//   ready    a fresh client (no backoff behind it) produces 20 new tasks to `in`: the broker serves
//   routed / leased / fresh  those 20 routed, leased (journal events, `at`) and answered; they
//            queue behind the backlog (same client), so leased and fresh follow `last`
//   join     the router's consumer of `in` joined its group again after a crash (its log line)
//   fetch    the executor's fetcher read `in` again after failed fetches (its log line)
//   first / last  the first and the last of the 300 results appended to `out`: the first is the
//            executor's result producer working again (`out` is created with
//            message.timestamp.type=LogAppendTime: a record's timestamp is the broker's append,
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
  eventually,
  median,
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
tasks in flight, --down ms down, restarted on the same data), timed from the instant the restarted
broker's port is open: a fresh client producing 20 new tasks (ready), the router routing them, the
router's consumer rejoining its group after a crash (join),
the executor's fetcher reading again after failures, the first and the last of the 300 results.
A '-' is an instant that did not happen (no crash, no failed fetch). --trace also prints the
results per 0.5 s; --log-dir <dir> keeps the Requester's logs.

  pnpm run bench:kafka-restart -- [--rounds 3] [--tasks 300] [--down 1500] [--baseline <checkout>] [--env K=V,...]
  node bench/kafka-restart.ts [options]

One private broker for the whole run (startPrivateKafka), a fresh stack (topics, Redis prefix,
database) and Requester process per round. With --baseline, rounds alternate between the two
checkouts (order flipped every round); medians and ranges per side, with the load average.`,
  options: {
    rounds: { type: 'string', default: '3', value: 'N', number: true, help: 'rounds per side' },
    tasks: { type: 'string', default: '300', value: 'N', number: true, help: 'tasks per round' },
    down: {
      type: 'string',
      default: '1500',
      value: 'MS',
      number: true,
      help: 'how long the broker stays down before it is started again (the test: 1500)',
    },
    baseline: {
      type: 'string',
      value: 'DIR',
      help: 'a second checkout (node_modules installed) whose Requester alternates with this one',
    },
    env: { type: 'string', value: 'K=V,...', help: 'extra environment for the Requester processes' },
    trace: { type: 'boolean', help: 'print the results appended per 0.5 s of each round' },
    'log-dir': { type: 'string', value: 'DIR', help: "keep each Requester's log there (<pid>.log)" },
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

type Marks = {
  ready?: number;
  routed?: number;
  leased?: number;
  fresh?: number;
  join?: number;
  fetch?: number;
  first?: number;
  last?: number;
};
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

/**
 * Keeps `child`'s log lines (pino JSON); the function returned finds the instant (`time`) of the
 * first one at or after `since` that matches.
 */
function watchLog(child: ChildProcess) {
  const lines: Array<{ time: string | number; msg: string; component?: string; group?: string }> = [];
  const dump = args['log-dir'] && createWriteStream(path.join(args['log-dir'], `${child.pid}.log`));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (dump) dump.write(`${line}\n`);
    try {
      lines.push(JSON.parse(line));
    } catch {}
  });
  return (since: number, match: (l: (typeof lines)[number]) => boolean) =>
    lines
      .map((l) => ({ ...l, at: typeof l.time === 'number' ? l.time : Date.parse(l.time) }))
      .find((l) => l.at >= since && match(l))?.at;
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
  // The task journal's events (each with the instant it happened, `at`): when the fresh tasks were
  // routed from `in` and leased by the executor.
  const journal = new Map<string, number>();
  const events = kafka.consumer({ groupId: `${topicOut}-events` });
  try {
    await waitReady(stack);
    await consumeEach(events, stack.config.topicEvents, (record: KafkaRecord) => {
      for (const e of JSON.parse(record.value?.toString() ?? '[]') as Array<{
        type: string;
        requestId?: string;
        at: number;
      }>)
        if (e.requestId?.startsWith('n-')) journal.set(`${e.type}:${e.requestId}`, e.at);
    });
    const ids = await sendSlowRequests(producer, stack, {
      url: target.url,
      prefix: 'r',
      count: TASKS,
      slowMs: 100,
    });
    await eventually(() => appended.size >= 30, 60_000, '30 results before the kill');
    await broker.kill();
    const killedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, Number(args.down)));
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
    await eventually(() => [...ids, ...fresh].every((id) => appended.has(id)), 150_000, 'every result');
    // The log lines and journal events of the last moments.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const after = ids
      .map((id) => appended.get(id) ?? 0)
      .filter((t) => t > killedAt)
      .sort((a, b) => a - b);
    const rel = (t: number | undefined) => (t === undefined ? undefined : t - t0);
    if (args.trace) {
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
      routed: rel(lastOf(fresh.map((id) => journal.get(`routed:${id}`)))),
      leased: rel(lastOf(fresh.map((id) => journal.get(`leased:${id}`)))),
      fresh: rel(Math.max(...fresh.map((id) => appended.get(id) ?? Number.NaN))),
      first: rel(after[0]),
      last: rel(after.at(-1)),
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)));
    await reader.stop().catch(() => {});
    await events.stop().catch(() => {});
  }
}

/** The latest of instants, undefined when one is missing (its event was not written). */
function lastOf(xs: Array<number | undefined>): number | undefined {
  return xs.some((x) => x === undefined) ? undefined : Math.max(...(xs as number[]));
}

const fmt = (v: number | undefined) => (v === undefined ? '-' : `${(v / 1000).toFixed(2)}s`);
const KEYS = ['ready', 'routed', 'leased', 'fresh', 'join', 'fetch', 'first', 'last'] as const;
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
      return `${k} ${fmt(median(xs))} [${fmt(xs[0])} – ${fmt(xs.at(-1))}]`;
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
