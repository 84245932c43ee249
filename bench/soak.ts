// Soak: a steady load for a long time, and whether memory stays flat. A whole Requester
// (`requester --role all`, a child process on its own topics, Redis prefix and database) gets a
// constant rate of direct-Kafka requests to one local target; every --interval seconds each side's
// RSS, heap and external memory are sampled; at the end a PNG plots them over time.
//
//   node bench/soak.ts [--duration 600 (s)] [--rate 500 (requests/s)] [--body 100]
//        [--interval 10 (s)] [--png .run/soak.png] [--baseline <checkout>] [--env K=V,...]
//        [--roles all] [--heap-snapshots DIR --snapshot-at 120,300,end]
//
// With --baseline <checkout> (e.g. a git worktree of main with its node_modules installed), a
// second Requester from that checkout gets the same load at the same time, and both are plotted.
// A real soak is ten minutes or more (the default); a short run only proves the script works.
//
// With --heap-snapshots DIR, each Requester is started with Node's --heapsnapshot-signal=SIGUSR2
// (and --diagnostic-dir DIR) and sent SIGUSR2 at each --snapshot-at second ("end": just before it
// stops); `node bench/heap-diff.ts a.heapsnapshot b.heapsnapshot` then says what grew between two.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import {
  createKafka,
  createLogger,
  type KafkaClient,
  type KafkaConsumer,
} from '../packages/shared/src/index.ts';
import { eventually, freePort } from '../packages/shared/src/testing/index.ts';
import { benchStackEnv, childProcesses, envPairs, exitBench, loadavg, parseBenchArgs } from './harness.ts';
import { formatMemory, type MemorySample, memoryOf } from './memory.ts';
import { type Panel, type Series, writePlot } from './plot.ts';

const { values: args } = parseBenchArgs({
  usage: `Soak: a steady load for a long time, and whether memory stays flat. A whole Requester
(requester --role all, a child process on its own topics, Redis prefix and database) gets a
constant rate of direct-Kafka requests to one local target; every --interval seconds each side's
RSS, heap and external memory are sampled; at the end a PNG plots them over time.

  node bench/soak.ts [--duration 600 (s)] [--rate 500 (requests/s)] [--body 100]
       [--interval 10 (s)] [--png .run/soak.png] [--baseline <checkout>] [--env K=V,...]
       [--roles all] [--heap-snapshots DIR --snapshot-at 120,300,end]

A real soak is ten minutes or more (the default); a short run only proves the script works.

As run for docs/benchmarks/memory.md:
  node bench/soak.ts --duration 480 --rate 60 --heap-snapshots .run/snaps1 --snapshot-at 60,180,300`,
  options: {
    duration: { type: 'string', default: '600', value: 'S', number: true, help: 'seconds of load' },
    rate: { type: 'string', default: '500', value: 'N', number: true, help: 'requests per second' },
    body: { type: 'string', default: '100', value: 'BYTES', number: true, help: 'request body size' },
    interval: {
      type: 'string',
      default: '10',
      value: 'S',
      number: true,
      help: 'seconds between memory samples',
    },
    png: { type: 'string', default: '.run/soak.png', value: 'FILE', help: 'where the plot goes' },
    baseline: {
      type: 'string',
      value: '<checkout>',
      help: 'a second Requester from that checkout gets the same load at the same time; both are plotted',
    },
    env: { type: 'string', default: '', value: 'K=V,...', help: 'extra environment of the Requester(s)' },
    roles: { type: 'string', default: 'all', value: 'ROLES', help: 'roles of the Requester(s)' },
    brokers: { type: 'string', default: '127.0.0.1:9092', value: 'HOST:PORT', help: 'Kafka brokers' },
    'heap-snapshots': {
      type: 'string',
      value: 'DIR',
      help: 'start each Requester with --heapsnapshot-signal=SIGUSR2 and write its snapshots to DIR (compare with bench/heap-diff.ts)',
    },
    'snapshot-at': {
      type: 'string',
      default: '120,300,end',
      value: 'LIST',
      help: 'seconds since the load started at which to snapshot ("end": just before it stops)',
    },
  },
});
const durationMs = Number(args.duration) * 1000;
const snapshotDir = args['heap-snapshots'] ? path.resolve(args['heap-snapshots']) : undefined;
const rate = Number(args.rate);
const intervalMs = Number(args.interval) * 1000;
const extraEnv = envPairs(args.env);
const here = path.resolve(import.meta.dirname, '..');
const kafka: KafkaClient = createKafka({
  brokers: args.brokers,
  clientId: 'bench-soak',
  logger: createLogger({ level: 'silent' }),
});

const children = childProcesses();

interface Side {
  label: string;
  pid: number;
  adminUrl: string;
  topicIn: string;
  sent: number;
  completed: number;
  samples: Array<{ atS: number } & MemorySample>;
  reader: KafkaConsumer;
}

async function startSide(label: string, root: string): Promise<Side> {
  const stack = await benchStackEnv({ KAFKA_BROKERS: args.brokers, LOG_LEVEL: 'warn', ...extraEnv });
  const snapshotOptions = snapshotDir
    ? { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${snapshotDir}` }
    : {};
  const child = spawn(path.join(root, 'packages/requester/bin/requester'), ['--role', args.roles ?? 'all'], {
    env: { ...process.env, ...stack.env, ...snapshotOptions },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  await eventually(
    () =>
      fetch(`${stack.adminUrl}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      ),
    90_000,
    `requester ${label} ready`,
  );
  const reader = kafka.consumer({
    groupId: `${stack.env.KAFKA_TOPIC_OUT}-soak-${randomBytes(3).toString('hex')}`,
    maxWaitMs: 100,
  });
  const side: Side = {
    label,
    pid: child.pid as number,
    adminUrl: stack.adminUrl,
    topicIn: stack.env.KAFKA_TOPIC_IN as string,
    sent: 0,
    completed: 0,
    samples: [],
    reader,
  };
  await reader.start({
    topics: [stack.env.KAFKA_TOPIC_OUT as string],
    fromBeginning: true,
    commit: 'never',
    onBatch: async ({ records }) => {
      side.completed += records.length;
    },
  });
  return side;
}

/** The project's test target in a child process (one local origin, as bench/load.ts uses). */
async function startTarget(): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(here, 'k6/target/serve.ts'), String(port)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await eventually(
    () =>
      fetch(`${url}/echo`).then(
        (r) => r.ok,
        () => false,
      ),
    90_000,
    'target ready',
  );
  return url;
}

/** Sends `rate` requests a second to every side, in ten slices a second, until `until`. */
async function steadyLoad(sides: Side[], targetUrl: string, until: number): Promise<void> {
  const producer = kafka.producer();
  await producer.connect();
  const body = 'x'.repeat(Number(args.body));
  const start = Date.now();
  let tick = 0;
  while (Date.now() < until) {
    tick++;
    // How many should be out by now, so that a slow send catches up instead of drifting.
    const due = Math.floor(((Date.now() - start) / 1000) * rate);
    await Promise.all(
      sides.map(async (side) => {
        const n = due - side.sent;
        if (n <= 0) return;
        const createdAt = new Date().toISOString();
        const records = Array.from({ length: n }, (_, i) => {
          const requestId = `soak-${side.label}-${side.sent + i}`;
          const request = { uri: `${targetUrl}/echo`, method: 'POST', body };
          return { key: requestId, value: JSON.stringify({ request, meta: { requestId }, createdAt }) };
        });
        side.sent += n;
        await producer.send(side.topicIn, records, 30_000);
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + tick * 100 - Date.now())));
  }
  await producer.disconnect();
}

async function sample(sides: Side[], start: number): Promise<void> {
  const atS = Math.round((Date.now() - start) / 1000);
  for (const side of sides) {
    const m = await memoryOf(side.pid, side.adminUrl);
    side.samples.push({ atS, ...m });
    console.log(
      `${String(atS).padStart(5)} s ${side.label.padEnd(9)} ${formatMemory(m)}; sent ${side.sent}, ` +
        `completed ${side.completed}; load average ${loadavg()}`,
    );
  }
}

/** SIGUSR2 at each --snapshot-at second: Node writes Heap.<date>.<pid>...heapsnapshot to the dir. */
function scheduleSnapshots(sides: Side[], start: number): NodeJS.Timeout[] {
  if (!snapshotDir) return [];
  mkdirSync(snapshotDir, { recursive: true });
  const seconds = (args['snapshot-at'] ?? '')
    .split(',')
    .filter((s) => s && s !== 'end')
    .map(Number);
  return seconds.map((s) =>
    setTimeout(() => void snapshotAll(sides, `${s} s`), start + s * 1000 - Date.now()),
  );
}

/** Signals every side and waits until its new snapshot is complete (writing takes seconds). */
async function snapshotAll(sides: Side[], label: string): Promise<void> {
  const dir = snapshotDir as string;
  const before = new Set(readdirSync(dir));
  for (const side of sides) process.kill(side.pid, 'SIGUSR2');
  await eventually(
    () => {
      const fresh = readdirSync(dir).filter((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
      if (fresh.length < sides.length) return false;
      // The JSON is complete when it ends with the strings array's close: `]}`.
      return fresh.every((f) => endsWith(path.join(dir, f), ']}'));
    },
    120_000,
    `heap snapshot at ${label}`,
  );
  console.log(`heap snapshot at ${label}: ${dir}`);
}
function endsWith(file: string, tail: string): boolean {
  const size = statSync(file).size;
  if (size < tail.length) return false;
  const buffer = Buffer.alloc(tail.length);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, buffer, 0, tail.length, size - tail.length);
  } finally {
    closeSync(fd);
  }
  return buffer.toString() === tail;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];

/** One panel: each side's RSS (solid), heap used (dashed) and heap total (dotted) over time, in its own color. */
function memoryPanel(sides: Side[]): Panel {
  const series = sides.flatMap((side, i): Series[] => {
    const color = COLORS[i % COLORS.length] as string;
    const over = (value: (p: MemorySample) => number) =>
      side.samples.map((p) => [p.atS, value(p)] as [number, number]);
    return [
      { name: `${side.label} RSS`, color, points: over((p) => p.rss) },
      { name: `${side.label} heap used`, color, dash: '6 4', points: over((p) => p.heapUsed) },
      // What V8 reserved: it follows the live heap's high-water mark, which a slow leak raises.
      { name: `${side.label} heap total`, color, dash: '2 3', points: over((p) => p.heapTotal) },
    ];
  });
  return { title: 'memory of the requester process', yLabel: 'MB', series };
}

async function main(): Promise<void> {
  console.log(
    `soak: ${rate} requests/s for ${durationMs / 1000} s, ${args.body} B bodies, RSS every ${intervalMs / 1000} s; ` +
      `load average ${loadavg()}`,
  );
  if (Object.keys(extraEnv).length) console.log(`extra env: ${JSON.stringify(extraEnv)}`);
  const targetUrl = await startTarget();
  const sides = [await startSide('new', here)];
  if (args.baseline) sides.push(await startSide('baseline', path.resolve(args.baseline)));
  const start = Date.now();
  await sample(sides, start);
  const sampler = setInterval(() => void sample(sides, start), intervalMs);
  const snapshots = scheduleSnapshots(sides, start);
  await steadyLoad(sides, targetUrl, start + durationMs);
  clearInterval(sampler);
  await sample(sides, start);
  for (const timer of snapshots) clearTimeout(timer);
  if (snapshotDir) await snapshotAll(sides, 'end');
  for (const side of sides) await side.reader.stop();
  const title = `requester --role all, ${rate} req/s direct Kafka, ${args.body} B bodies (load average ${loadavg()})`;
  const out = path.resolve(here, args.png ?? '.run/soak.png');
  writePlot(out, { title, panels: [memoryPanel(sides)], xLabel: 'time since the load started (s)' });
  for (const side of sides) {
    const rss = side.samples.map((p) => p.rss);
    const half = rss.slice(Math.floor(rss.length / 2));
    console.log(
      `${side.label}: RSS first ${rss[0]?.toFixed(0)} MB, max ${Math.max(...rss).toFixed(0)} MB, last ` +
        `${rss.at(-1)?.toFixed(0)} MB; second half min ${Math.min(...half).toFixed(0)} max ${Math.max(...half).toFixed(0)} MB; ` +
        `sent ${side.sent}, completed ${side.completed}`,
    );
  }
  console.log(`plot: ${out}`);
}

await main();
await exitBench(0);
