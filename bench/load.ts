// End-to-end load harness: a whole Requester (`requester --role all`, a child process on its own
// topics, Redis prefix and database) against the project's test target (another child process),
// driven over HTTP (async or sync) or straight into Kafka, results counted on `out`.
//
//   pnpm run bench:load -- --mode ...   (or: node bench/load.ts, on the project's Node 24)
//   node bench/load.ts --mode http-async|sync|kafka [--count 20000] [--connections 64]
//        [--body 100] [--rounds 3] [--baseline /tmp/baseline] [--limit 120 (s)] [--env K=V,...]
//        [--producer requester|kafkajs [--batch-bytes 1048576]]   (--mode kafka: Requester's writer,
//        or a plain kafkajs producer batching as an outside one does)
//        [--roles all]   (e.g. ingress,sync-gateway: accepts alone, nothing consumes `in`)
//        [--wake]   (wake-ups: an empty `request.uri`, nobody is called: Requester's own cost per task)
//        [--memory]   (each side's RSS and heap after every round and after --idle seconds at the end,
//        and its collections of each round by kind)
//        [--idle-cpu S]   (each side's CPU while idle, S seconds after the warm-up: its fixed cost)
//        [--profile-rounds]   (a CPU and an allocation profile of each round, bench/profile-rounds.ts:
//        bytes allocated per task, and node CPU per task with the HTTP call's share taken out)
//        [--profile-cpu]   (the CPU profile alone: the allocation sampler inflates the node CPU beside it)
//        [--stages]   (per-stage latencies of each side, from its task journal: see stageReport)
//        [--executors 1,2]   (one side per count, all from this checkout: `--role ingress,
//        sync-gateway,router,relay` plus `requester --role executor --processes N`; CPU of the
//        executors summed over the supervisor and its children)
//
// With --baseline <checkout>, a second Requester runs from that checkout (e.g. a git worktree of
// main with its node_modules installed) and the rounds alternate between the two, the order
// flipped each round, so that the shared machine's noise hits both sides alike; the report gives
// the ratio new / baseline of the medians.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as hdr from 'hdr-histogram-js';
import { Pool } from 'undici';
import { stackEnv } from '../packages/requester/test/e2e/stack.fixture.ts';
import {
  createKafka,
  createLogger,
  type KafkaClient,
  type KafkaConsumer,
} from '../packages/shared/src/index.ts';
import {
  eventually,
  freePort,
  median,
  processCpuSeconds,
  processTreeCpuSeconds,
} from '../packages/shared/src/testing/index.ts';
import { childProcesses, envPairs, loadavg, parseBenchArgs } from './harness.ts';
import { formatGc, formatMemory, gcOf, memoryOf } from './memory.ts';
import { allocated, cpuSummary } from './profile-rounds.ts';

// A plain kafkajs client for --producer kafkajs (the root package does not depend on kafkajs).
interface PlainKafkaClient {
  producer(): {
    connect(): Promise<void>;
    send(batch: {
      topic: string;
      messages: Array<{ key: string; value: string; partition: number | undefined }>;
    }): Promise<unknown>;
    disconnect(): Promise<void>;
  };
  admin(): {
    connect(): Promise<void>;
    fetchTopicOffsets(topic: string): Promise<unknown[]>;
    disconnect(): Promise<void>;
  };
}
const { Kafka: PlainKafka } = createRequire(
  path.resolve(import.meta.dirname, '../packages/shared/package.json'),
)('kafkajs') as {
  Kafka: new (config: { clientId: string; brokers: string[]; logLevel: number }) => PlainKafkaClient;
};

type Mode = 'http-async' | 'sync' | 'kafka';

const { values: args, fail } = parseBenchArgs({
  usage: `End-to-end load harness: a whole Requester (requester --role all, a child process on its own
topics, Redis prefix and database) against the project's test target (another child process),
driven over HTTP (async or sync) or straight into Kafka, results counted on out.

  pnpm run bench:load -- --mode ...   (or: node bench/load.ts, on the project's Node 24)
  node bench/load.ts --mode http-async|sync|kafka [--count 20000] [--connections 64]
       [--body 100] [--rounds 3] [--baseline /tmp/baseline] [--limit 120 (s)] [--env K=V,...]

With --baseline <checkout>, a second Requester runs from that checkout and the rounds alternate
between the two, the order flipped each round; the report gives the ratio new / baseline of the
medians.

As run for docs/benchmarks/load.md:
  pnpm run bench:load -- --mode http-async --count 20000 --connections 64 --rounds 2 --baseline /tmp/baseline`,
  options: {
    mode: {
      type: 'string',
      default: 'http-async',
      value: 'http-async|sync|kafka',
      help: 'how requests are sent',
    },
    count: { type: 'string', default: '20000', value: 'N', number: true, help: 'requests per round' },
    connections: { type: 'string', default: '64', value: 'N', number: true, help: 'HTTP connections' },
    body: { type: 'string', default: '100', value: 'BYTES', number: true, help: 'request body size' },
    rounds: { type: 'string', default: '1', value: 'N', number: true, help: 'rounds per side' },
    baseline: {
      type: 'string',
      value: '<checkout>',
      help: 'a second Requester from that checkout (e.g. a worktree of main, node_modules installed)',
    },
    limit: { type: 'string', default: '120', value: 'S', number: true, help: 'seconds a round may take' },
    env: { type: 'string', default: '', value: 'K=V,...', help: 'extra environment of the Requester(s)' },
    roles: {
      type: 'string',
      default: 'all',
      value: 'ROLES',
      help: 'roles of the Requester(s) under test (e.g. ingress,sync-gateway: accepts alone, nothing consumes in)',
    },
    executors: {
      type: 'string',
      value: '1,2',
      help: 'one side per count, all from this checkout: --role ingress,sync-gateway,router,relay plus requester --role executor --processes N (CPU of the executors summed)',
    },
    producer: {
      type: 'string',
      default: 'requester',
      value: 'requester|kafkajs',
      help: "--mode kafka: who writes in: Requester's own producer (512 KiB requests), or a plain kafkajs producer as an outside one (its default partitioner and batching: a send of 100 records is one batch per partition)",
    },
    'batch-bytes': {
      type: 'string',
      default: '0',
      value: 'BYTES',
      number: true,
      help: '--producer kafkajs: each send carries records of one partition (round-robin) up to BYTES, one record batch (e.g. 1048576, as librdkafka with linger.ms or the Java client with batch.size fill them); 0 = sends of 100 keyed records',
    },
    wake: {
      type: 'boolean',
      default: false,
      help: "wake-ups: an empty request.uri, nobody is called (Requester's own cost per task)",
    },
    'profile-rounds': {
      type: 'boolean',
      default: false,
      help: "a CPU and an allocation profile of each round (bench/profile-rounds.ts preloaded): bytes allocated per task, node CPU per task without the HTTP call's share",
    },
    'profile-cpu': {
      type: 'boolean',
      default: false,
      help: "--profile-rounds without the allocation profile, whose sampling inflates the node CPU measured beside it: the truer node CPU per task without the HTTP call's share",
    },
    together: {
      type: 'boolean',
      default: false,
      help: "with --baseline: both sides' rounds at once (each its own requests, the one target), so that both meet the same moments of a shared, noisy box; the node CPU per task of each, side by side, at half the rate each would have alone",
    },
    stages: {
      type: 'boolean',
      default: false,
      help: 'per-stage latencies of each side, read back from its task journal',
    },
    memory: {
      type: 'boolean',
      default: false,
      help: "each side's RSS and heap after every round and after --idle seconds at the end, and its collections of the round by kind",
    },
    idle: {
      type: 'string',
      default: '20',
      value: 'S',
      number: true,
      help: 'seconds idle before the last --memory sample',
    },
    'idle-cpu': {
      type: 'string',
      default: '0',
      value: 'S',
      number: true,
      help: "each side's CPU while idle, over S seconds after the warm-up (its fixed cost: timers, polls)",
    },
    brokers: { type: 'string', default: '127.0.0.1:9092', value: 'HOST:PORT', help: 'Kafka brokers' },
  },
});

const mode = args.mode as Mode;
if (!['http-async', 'sync', 'kafka'].includes(mode))
  fail(`--mode must be http-async, sync or kafka, got ${mode}`);
if (!['requester', 'kafkajs'].includes(args.producer as string))
  fail(`--producer must be requester or kafkajs, got ${args.producer}`);
const batchBytes = Number(args['batch-bytes']);
const count = Number(args.count);
const connections = Number(args.connections);
const bodyBytes = Number(args.body);
const rounds = Number(args.rounds);
/** Seconds one round may take at most: what is unfinished by then is reported as such. */
const limitMs = Number(args.limit) * 1000;
const extraEnv = envPairs(args.env);
const profileCpuOnly = Boolean(args['profile-cpu']);
const profileRounds = Boolean(args['profile-rounds']) || profileCpuOnly;
if (profileCpuOnly) extraEnv.PROFILE_ROUNDS = 'cpu';
if (profileRounds)
  // This checkout's copy for every side: the baseline's may predate it.
  extraEnv.NODE_OPTIONS =
    `${extraEnv.NODE_OPTIONS ?? ''} --import=${path.resolve(import.meta.dirname, 'profile-rounds.ts')}`.trim();
/** Executor process counts to compare (--executors): one Requester per count, same checkout. */
const executorCounts = (args.executors ?? '').split(',').filter(Boolean).map(Number);
/** Whether the Requester(s) run the whole pipeline (results are counted per completed task). */
const pipeline = args.roles === 'all' || executorCounts.length > 0;
const here = path.resolve(import.meta.dirname, '..');
const silent = createLogger({ level: 'silent' });
const kafka: KafkaClient = createKafka({ brokers: args.brokers, clientId: 'bench-load', logger: silent });

// ---------------------------------------------------------------------------------------------
// Processes

const children = childProcesses();

/** Waits until `check` holds (a failing check counts as not yet), for at most 90 s. */
function ready(what: string, check: () => Promise<boolean>): Promise<void> {
  return eventually(() => check().catch(() => false), 90_000, `${what} ready`);
}

async function startTarget(): Promise<{ url: string; pid: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(here, 'k6/target/serve.ts'), String(port)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await ready('target', async () => (await fetch(`${url}/echo`)).ok);
  return { url, pid: child.pid as number };
}

interface Side {
  label: string;
  pid: number;
  /** The `--processes N` executor supervisor, with --executors. */
  executorPid?: number;
  /** Its admin URL (with --executors 1 the supervisor runs the executor itself). */
  executorAdminUrl?: string;
  env: Record<string, string>;
  httpUrl: string;
  token: string;
  pool: Pool;
  results: ResultReader;
  adminUrl: string;
}

/** A Requester from `root` on topics, prefix and database of its own. */
async function startRequester(label: string, root: string, executors?: number): Promise<Side> {
  // The e2e stack's environment: topics (events included), Redis prefix and database of its own.
  const stack = await stackEnv({ KAFKA_BROKERS: args.brokers, LOG_LEVEL: 'warn', ...extraEnv });
  const { env } = stack;
  const bin = path.join(root, 'packages/requester/bin/requester');
  const roles = executors ? 'ingress,sync-gateway,router,relay' : (args.roles ?? 'all');
  const child = spawn(bin, ['--role', roles], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  await ready(`requester ${label}`, async () => (await fetch(`${stack.adminUrl}/readyz`)).status === 200);
  const executor = executors ? await startExecutors(label, bin, env, executors) : undefined;
  const token = await createKey(bin, env);
  const results = new ResultReader(env.KAFKA_TOPIC_OUT as string);
  await results.start();
  const { httpUrl } = stack;
  const pool = new Pool(httpUrl, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const { adminUrl } = stack;
  return {
    label,
    pid: child.pid as number,
    executorPid: executor?.pid,
    executorAdminUrl: executor?.adminUrl,
    env,
    httpUrl,
    token,
    pool,
    results,
    adminUrl,
  };
}

/** `requester --role executor --processes n` beside a Requester; resolves when every child is ready. */
async function startExecutors(
  label: string,
  bin: string,
  env: Record<string, string>,
  n: number,
): Promise<{ pid: number; adminUrl: string }> {
  const adminPort = await freePort();
  const child = spawn(bin, ['--role', 'executor', '--processes', String(n)], {
    env: { ...process.env, ...env, ADMIN_PORT: String(adminPort) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  for (let i = 0; i < n; i++) {
    const url = `http://127.0.0.1:${adminPort + i}/readyz`;
    await ready(`executor ${i} of ${label}`, async () => (await fetch(url)).status === 200);
  }
  return { pid: child.pid as number, adminUrl: `http://127.0.0.1:${adminPort}` };
}

/** An API key allowed sync calls, made with the CLI as an operator would. */
function createKey(bin: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ['keys', 'create', '--name', 'bench', '--sync'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on('exit', (code) =>
      code === 0 ? resolve(out.trim()) : reject(new Error(`keys create exited ${code}`)),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Results on `out`

interface Tracker {
  prefix: string;
  sentAt: Map<string, number>;
  histogram: hdr.Histogram;
  done: number;
  lastAt: number;
  onDone?: () => void;
}

/** Reads `out` from its start; hands each result of the current round to its tracker. */
class ResultReader {
  private readonly consumer: KafkaConsumer;
  private readonly seen = new Set<string>();
  private readonly topic: string;
  current: Tracker | undefined;

  constructor(topic: string) {
    this.topic = topic;
    this.consumer = kafka.consumer({
      groupId: `${topic}-reader-${randomBytes(3).toString('hex')}`,
      maxWaitMs: 100,
    });
  }

  async start(): Promise<void> {
    await this.consumer.start({
      topics: [this.topic],
      fromBeginning: true,
      commit: 'never',
      partitionsConsumedConcurrently: 3,
      onBatch: async ({ records }) => {
        const now = performance.now();
        for (const record of records) this.take(record.key?.toString() ?? '', now);
      },
    });
  }

  private take(id: string, now: number): void {
    const tracker = this.current;
    if (!tracker || !id.startsWith(tracker.prefix) || this.seen.has(id)) return;
    const sent = tracker.sentAt.get(id);
    if (sent === undefined) return;
    this.seen.add(id);
    tracker.histogram.recordValue(Math.max(1, Math.round((now - sent) * 1000)));
    tracker.done++;
    tracker.lastAt = now;
    if (tracker.done === tracker.sentAt.size) tracker.onDone?.();
  }

  stop(): Promise<void> {
    return this.consumer.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// CPU

/** The executors' supervisor counts with its children; every other process alone. */
const cpuOf = (key: string, pid: number) =>
  (key === 'executors' ? processTreeCpuSeconds(pid) : processCpuSeconds(pid)) ?? Number.NaN;

/**
 * Bytes a process has read (`rchar` of /proc/<pid>/io: sockets included). Per task of Requester:
 * what it receives of `in` (the router's consume, the executor's reads by offset), of Redis and of
 * the target. Unlike the rates, the load of a shared box does not move it.
 */
function readBytesOf(pid: number): number {
  try {
    return Number(/^rchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
}

/**
 * Each side's CPU while nothing is sent, all sides over the same seconds: what it spends per
 * second whatever the load (timers, polls, heartbeats), which a slow round divides among few tasks.
 */
async function idleCpu(sides: Side[], seconds: number): Promise<void> {
  const before = sides.map((side) => cpuOf('node', side.pid));
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  sides.forEach((side, i) => {
    const perSecond = (cpuOf('node', side.pid) - (before[i] as number)) / seconds;
    console.log(
      `idle     ${side.label.padEnd(9)} node CPU ${(perSecond * 1000).toFixed(1)} ms/s over ${seconds} s`,
    );
  });
}

/** The pid listening on a local TCP port (from /proc/net/tcp and the fds of each process). */
function pidListeningOn(port: number): number | undefined {
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10 || cols[3] !== '0A') continue;
      if (Number.parseInt(cols[1]?.split(':')[1] ?? '', 16) === port) inodes.add(cols[9] as string);
    }
  }
  for (const pid of readdirSync('/proc').filter((p: string) => /^\d+$/.test(p))) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
        const m = /^socket:\[(\d+)\]$/.exec(link);
        if (m && inodes.has(m[1] as string)) return Number(pid);
      }
    } catch {}
  }
  return undefined;
}

/**
 * A side's memory, as bench/memory.ts reads it. With `--executors 1` the executor is a process of
 * its own (the supervisor runs it in-process), so it is reported apart: the per-role figures.
 */
async function memoryOfSide(side: Side): Promise<string> {
  const own = formatMemory(await memoryOf(side.pid, side.adminUrl));
  if (!side.executorPid || !side.executorAdminUrl || executorCounts.some((n) => n !== 1)) return own;
  const executor = formatMemory(await memoryOf(side.executorPid, side.executorAdminUrl));
  return `${own}; executor ${executor}`;
}

// ---------------------------------------------------------------------------------------------
// Load

function bodyOf(id: string, targetUrl: string, sync: boolean): string {
  const body = 'x'.repeat(bodyBytes);
  return JSON.stringify({
    request: args.wake ? { uri: '', body } : { uri: `${targetUrl}/echo`, method: 'POST', body },
    meta: { requestId: id, ...(sync ? { sync: true } : {}) },
  });
}

interface RoundResult {
  side: string;
  sent: number;
  accepted: number;
  completed: number;
  errors: number;
  acceptedPerSec: number;
  completedPerSec: number;
  latency: hdr.Histogram;
  /** sync: the HTTP round trip per call. */
  rtt?: hdr.Histogram;
  cpu: Record<string, number>;
  /** Bytes Requester read (rchar) during the round. */
  readBytes: number;
  timedOut: boolean;
  /** --profile-rounds: what the round's profiles say. */
  profile?: RoundProfile;
}

interface RoundProfile {
  file: string;
  allocatedPerTask: number;
  busyPerTask: number;
  httpShare: number;
  gcShare: number;
  withoutHttpPerTask: number;
}

const newHistogram = () =>
  hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 600_000_000,
    numberOfSignificantValueDigits: 3,
  });

async function round(
  side: Side,
  n: number,
  target: { url: string; pid: number },
  pids: Record<string, number | undefined>,
): Promise<RoundResult> {
  const prefix = `${side.label}-r${n}-${randomBytes(2).toString('hex')}-`;
  const tracker: Tracker = { prefix, sentAt: new Map(), histogram: newHistogram(), done: 0, lastAt: 0 };
  side.results.current = tracker;
  const allDone = new Promise<void>((resolve) => {
    tracker.onDone = resolve;
  });
  const readBefore = readBytesOf(side.pid);
  const cpuBefore = Object.fromEntries(
    Object.entries(pids).map(([k, pid]) => [k, pid ? cpuOf(k, pid) : Number.NaN]),
  );
  const deadline = performance.now() + limitMs;
  const start = performance.now();
  let accepted = 0;
  let errors = 0;
  let firstAccept = Number.POSITIVE_INFINITY;
  let lastAccept = 0;
  const rtt = newHistogram();

  if (mode === 'kafka' && args.producer === 'kafkajs') {
    const sent = await produceAsOutsider(side, target.url, prefix, tracker, deadline);
    firstAccept = sent.firstAccept;
    lastAccept = sent.lastAccept;
    accepted = sent.accepted;
  } else if (mode === 'kafka') {
    const producer = kafka.producer();
    await producer.connect();
    const batch = 100;
    let next = 0;
    const loop = async () => {
      while (next < count && performance.now() < deadline) {
        const from = next;
        next = Math.min(count, next + batch);
        const records = [];
        const createdAt = new Date().toISOString();
        for (let i = from; i < next; i++) {
          const id = `${prefix}${i}`;
          tracker.sentAt.set(id, performance.now());
          const value = JSON.parse(bodyOf(id, target.url, false));
          records.push({ key: id, value: JSON.stringify({ ...value, createdAt }) });
        }
        const t0 = performance.now();
        await producer.send(side.env.KAFKA_TOPIC_IN as string, records, 30_000);
        firstAccept = Math.min(firstAccept, t0);
        lastAccept = performance.now();
        accepted += records.length;
      }
    };
    await Promise.all(Array.from({ length: 8 }, loop));
    await producer.disconnect();
  } else {
    const sync = mode === 'sync';
    let next = 0;
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${side.token}` };
    const loop = async () => {
      while (next < count && performance.now() < deadline) {
        const id = `${prefix}${next++}`;
        const t0 = performance.now();
        tracker.sentAt.set(id, t0);
        try {
          const res = await side.pool.request({
            path: '/request',
            method: 'POST',
            headers,
            body: bodyOf(id, target.url, sync),
          });
          await res.body.dump();
          const t1 = performance.now();
          if (res.statusCode === (sync ? 200 : 202)) {
            accepted++;
            firstAccept = Math.min(firstAccept, t0);
            lastAccept = t1;
            rtt.recordValue(Math.max(1, Math.round((t1 - t0) * 1000)));
          } else {
            errors++;
            tracker.sentAt.delete(id);
          }
        } catch {
          errors++;
          tracker.sentAt.delete(id);
        }
      }
    };
    await Promise.all(Array.from({ length: connections }, loop));
  }
  const sent = tracker.sentAt.size;
  // Nothing reads `in` without the router and executor: results are not waited for.
  if (tracker.done < sent && pipeline) {
    const remaining = deadline - performance.now();
    await Promise.race([allDone, new Promise((resolve) => setTimeout(resolve, Math.max(remaining, 5_000)))]);
  }
  side.results.current = undefined;
  const readBytes = readBytesOf(side.pid) - readBefore;
  const cpu = Object.fromEntries(
    Object.entries(pids).map(([k, pid]) => [k, pid ? cpuOf(k, pid) - (cpuBefore[k] as number) : Number.NaN]),
  );
  const acceptSpan = (lastAccept - (Number.isFinite(firstAccept) ? firstAccept : start)) / 1000;
  const completeSpan =
    ((tracker.lastAt || performance.now()) - (Number.isFinite(firstAccept) ? firstAccept : start)) / 1000;
  return {
    side: side.label,
    sent,
    accepted,
    completed: tracker.done,
    errors,
    acceptedPerSec: accepted / acceptSpan,
    completedPerSec: tracker.done / completeSpan,
    latency: tracker.histogram,
    ...(mode === 'sync' ? { rtt } : {}),
    cpu,
    readBytes,
    timedOut: tracker.done < sent,
  };
}

/**
 * Writes the round's records to `in` as a producer outside Requester does: a plain kafkajs
 * producer (its default partitioner; acks from all replicas), not Requester's writer, which keeps a
 * big record's batch small. Sends of 100 keyed records (one record batch per partition each), or
 * with --batch-bytes sends of one partition's records up to that many bytes (round-robin).
 */
async function produceAsOutsider(
  side: Side,
  targetUrl: string,
  prefix: string,
  tracker: Tracker,
  deadline: number,
): Promise<{ firstAccept: number; lastAccept: number; accepted: number }> {
  const topic = side.env.KAFKA_TOPIC_IN as string;
  const client = new PlainKafka({
    clientId: 'bench-outsider',
    brokers: args.brokers.split(','),
    logLevel: 0,
  });
  const producer = client.producer();
  await producer.connect();
  const admin = client.admin();
  await admin.connect();
  const partitions = (await admin.fetchTopicOffsets(topic)).length;
  await admin.disconnect();
  const perSend = batchBytes > 0 ? Math.max(1, Math.floor(batchBytes / (bodyBytes + 400))) : 100;
  let next = 0;
  let sends = 0;
  let firstAccept = Number.POSITIVE_INFINITY;
  let lastAccept = 0;
  let accepted = 0;
  const loop = async () => {
    while (next < count && performance.now() < deadline) {
      const from = next;
      next = Math.min(count, next + perSend);
      const partition = batchBytes > 0 ? sends++ % partitions : undefined;
      const createdAt = new Date().toISOString();
      const messages = [];
      for (let i = from; i < next; i++) {
        const id = `${prefix}${i}`;
        tracker.sentAt.set(id, performance.now());
        const value = JSON.parse(bodyOf(id, targetUrl, false));
        messages.push({ key: id, value: JSON.stringify({ ...value, createdAt }), partition });
      }
      const t0 = performance.now();
      await producer.send({ topic, messages });
      firstAccept = Math.min(firstAccept, t0);
      lastAccept = performance.now();
      accepted += messages.length;
    }
  };
  await Promise.all(Array.from({ length: 8 }, loop));
  await producer.disconnect();
  return { firstAccept, lastAccept, accepted };
}

/** The target's own latency at the same concurrency (what sync overhead is measured against). */
async function targetLatency(target: { url: string }, n: number): Promise<hdr.Histogram> {
  const pool = new Pool(target.url, { connections, pipelining: 1 });
  const histogram = newHistogram();
  let next = 0;
  const loop = async () => {
    while (next++ < n) {
      const t0 = performance.now();
      const res = await pool.request({ path: '/echo', method: 'POST', body: 'x'.repeat(bodyBytes) });
      await res.body.dump();
      histogram.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1000)));
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  await pool.close();
  return histogram;
}

/** Stops the profilers of `side` (bench/profile-rounds.ts) and reads what they wrote. */
async function roundProfile(side: Side, r: RoundResult): Promise<RoundProfile> {
  const stretch = (profiled.get(side.pid) ?? 0) + 1;
  profiled.set(side.pid, stretch);
  process.kill(side.pid, 'SIGUSR2');
  const base = path.join(tmpdir(), 'profile-rounds', `${side.pid}-${stretch}`);
  await eventually(() => existsSync(`${base}.cpuprofile`), 60_000, `${side.label}'s profiles`);
  const cpu = cpuSummary(`${base}.cpuprofile`);
  const tasks = Math.max(r.completed, 1);
  const httpShare = cpu.httpUs / Math.max(cpu.busyUs, 1);
  return {
    file: base,
    allocatedPerTask: profileCpuOnly ? Number.NaN : allocated(`${base}.heapprofile`).bytes / tasks,
    busyPerTask: cpu.busyUs / tasks,
    httpShare,
    gcShare: cpu.gcUs / Math.max(cpu.busyUs, 1),
    // The node CPU per task measured from /proc (every thread), less the HTTP call's share of the
    // profiled main thread's busy time.
    withoutHttpPerTask: ((r.cpu.node ?? Number.NaN) / tasks) * 1e6 * (1 - httpShare),
  };
}
const profiled = new Map<number, number>();

function profileLine(r: RoundResult): string {
  const p = r.profile as RoundProfile;
  return (
    `${profileCpuOnly ? '' : `allocated ${(p.allocatedPerTask / 1024).toFixed(1)} KiB/task; `}main thread busy ${p.busyPerTask.toFixed(0)} µs/task ` +
    `(HTTP call ${(p.httpShare * 100).toFixed(1)} %, GC ${(p.gcShare * 100).toFixed(1)} %); node CPU/task without the HTTP call ` +
    `${p.withoutHttpPerTask.toFixed(0)}µs (${p.file}.*)`
  );
}

// ---------------------------------------------------------------------------------------------
// Report

const ms = (h: hdr.Histogram, p: number) => (h.getValueAtPercentile(p) / 1000).toFixed(1);

function line(r: RoundResult): string {
  const cpu = Object.entries(r.cpu)
    // Per accept when nothing runs the requests (--roles without the pipeline).
    .map(([k, s]) => `${k} ${((s / Math.max(pipeline ? r.completed : r.accepted, 1)) * 1e6).toFixed(0)}µs`)
    .join(', ');
  const lat = `latency→out p50 ${ms(r.latency, 50)} p99 ${ms(r.latency, 99)} ms`;
  const rtt = r.rtt ? `, reply p50 ${ms(r.rtt, 50)} p99 ${ms(r.rtt, 99)} ms` : '';
  return (
    `${r.side.padEnd(9)} accepted ${r.accepted}/${r.sent} (${r.acceptedPerSec.toFixed(0)}/s), completed ${r.completed} ` +
    `(${r.completedPerSec.toFixed(0)}/s), errors ${r.errors}${r.timedOut ? ' TIMED OUT' : ''}; ${lat}${rtt}; CPU/task: ${cpu}; ` +
    `read/task ${(r.readBytes / Math.max(pipeline ? r.completed : r.accepted, 1) / 1024).toFixed(1)} KiB`
  );
}

async function main(): Promise<void> {
  console.log(
    `mode ${mode}${mode === 'kafka' ? ` (producer ${args.producer}${batchBytes > 0 ? `, ${batchBytes} B sends` : ''})` : ''}${args.wake ? ' (wake-ups)' : ''}, ${count} requests of ${bodyBytes} B, ${connections} connections, ${rounds} round(s); load average ${loadavg()}`,
  );
  if (Object.keys(extraEnv).length) console.log(`extra env: ${JSON.stringify(extraEnv)}`);
  const target = await startTarget();
  const brokerPort = Number(args.brokers.split(',')[0]?.split(':')[1] ?? 9092);
  const sides = executorCounts.length
    ? await Promise.all(executorCounts.map((n) => startRequester(`x${n}`, here, n)))
    : [await startRequester('new', here)];
  if (args.baseline && !executorCounts.length)
    sides.push(await startRequester('baseline', path.resolve(args.baseline)));
  // A short warm-up per side: JIT, connections, topic metadata.
  const all: RoundResult[] = [];
  for (const side of sides) await warmUp(side, target);
  if (args.memory)
    for (const side of sides)
      console.log(`warm     ${side.label.padEnd(9)} memory: ${await memoryOfSide(side)}`);
  if (Number(args['idle-cpu']) > 0) await idleCpu(sides, Number(args['idle-cpu']));
  const measured = async (side: Side, n: number) => {
    // Looked up each round: another developer may have restarted the shared broker meanwhile.
    const broker = pidListeningOn(brokerPort);
    const redis = pidListeningOn(6379);
    const pids = {
      node: side.pid,
      ...(side.executorPid ? { executors: side.executorPid } : {}),
      target: target.pid,
      broker,
      redis,
    };
    const gcBefore = args.memory ? await gcOf(side.adminUrl) : undefined;
    if (profileRounds) process.kill(side.pid, 'SIGUSR2');
    const r = await round(side, n, target, pids);
    const gc = gcBefore && formatGc(gcBefore, await gcOf(side.adminUrl), r.completed);
    if (profileRounds) r.profile = await roundProfile(side, r);
    const memory = args.memory ? await memoryOfSide(side) : undefined;
    return { side, r, gc, memory };
  };
  for (let n = 1; n <= rounds; n++) {
    const order = n % 2 ? sides : [...sides].reverse();
    const results = [];
    if (args.together) results.push(...(await Promise.all(order.map((side) => measured(side, n)))));
    else for (const side of order) results.push(await measured(side, n));
    for (const { side, r, gc, memory } of results) {
      all.push(r);
      console.log(`round ${n} ${line(r)}`);
      if (r.profile) console.log(`round ${n} ${side.label.padEnd(9)} ${profileLine(r)}`);
      if (memory) console.log(`round ${n} ${side.label.padEnd(9)} memory: ${memory}`);
      if (gc) console.log(`round ${n} ${side.label.padEnd(9)} GC on the main thread: ${gc}`);
    }
  }
  if (args.memory) {
    await new Promise((resolve) => setTimeout(resolve, Number(args.idle) * 1000));
    for (const side of sides)
      console.log(`idle ${args.idle} s ${side.label.padEnd(9)} memory: ${await memoryOfSide(side)}`);
  }
  if (mode === 'sync') {
    const own = await targetLatency(target, Math.min(count, 5_000));
    console.log(`target alone (${connections} connections): p50 ${ms(own, 50)} p99 ${ms(own, 99)} ms`);
  }
  const by = (label: string) => all.filter((r) => r.side === label);
  for (const side of sides) {
    const rs = by(side.label);
    const lat = (p: number) => median(rs.map((r) => (r.rtt ?? r.latency).getValueAtPercentile(p) / 1000));
    console.log(
      `median ${side.label}: accepted ${median(rs.map((r) => r.acceptedPerSec)).toFixed(0)}/s, completed ` +
        `${median(rs.map((r) => r.completedPerSec)).toFixed(0)}/s, ${mode === 'sync' ? 'reply' : 'latency→out'} ` +
        `p50 ${lat(50).toFixed(1)} ms p99 ${lat(99).toFixed(1)} ms`,
    );
  }
  if (sides.length === 2) {
    const [a, b] = [by(sides[0]?.label ?? ''), by(sides[1]?.label ?? '')];
    const ratio = (f: (r: RoundResult) => number) => (median(a.map(f)) / median(b.map(f))).toFixed(2);
    const p = (q: number) => (r: RoundResult) => (r.rtt ?? r.latency).getValueAtPercentile(q);
    // The Requester's CPU per task (per accept without the pipeline), as `line` prints it.
    const cpu = (r: RoundResult) =>
      (r.cpu.node ?? Number.NaN) / Math.max(pipeline ? r.completed : r.accepted, 1);
    console.log(
      `ratio ${sides[0]?.label}/${sides[1]?.label}: accepted/s ${ratio((r) => r.acceptedPerSec)}, completed/s ${ratio((r) => r.completedPerSec)}, ` +
        `p50 ${ratio(p(50))}, p99 ${ratio(p(99))}, node CPU/task ${ratio(cpu)} ` +
        `(medians ${(median(a.map(cpu)) * 1e6).toFixed(0)} / ${(median(b.map(cpu)) * 1e6).toFixed(0)} µs)`,
    );
    // Round by round (the two sides of a round ran next to each other, or at once with --together):
    // the box's slow and fast minutes fall on both sides of a round's ratio alike.
    const perRound = (f: (r: RoundResult) => number) => {
      const ratios = a.map((r, i) => f(r) / f(b[i] as RoundResult)).filter(Number.isFinite);
      const mean = Math.exp(ratios.reduce((sum, x) => sum + Math.log(x), 0) / Math.max(1, ratios.length));
      return `${ratios.map((x) => x.toFixed(2)).join(' ')} (geometric mean ${mean.toFixed(3)})`;
    };
    console.log(`per round ${sides[0]?.label}/${sides[1]?.label}: node CPU/task ${perRound(cpu)}`);
    if (profileRounds) {
      const of = (f: (p: RoundProfile) => number) => (r: RoundResult) => f(r.profile as RoundProfile);
      console.log(
        `per round ${sides[0]?.label}/${sides[1]?.label}: node CPU/task without the HTTP call ${perRound(of((p) => p.withoutHttpPerTask))}`,
      );
      const pair = (f: (p: RoundProfile) => number, digits = 0) =>
        `${median(a.map(of(f))).toFixed(digits)} / ${median(b.map(of(f))).toFixed(digits)} (${ratio(of(f))})`;
      console.log(
        `profiles ${sides[0]?.label}/${sides[1]?.label}, medians: ` +
          `${profileCpuOnly ? '' : `allocated KiB/task ${pair((p) => p.allocatedPerTask / 1024, 1)}, `}` +
          `main thread busy µs/task ${pair((p) => p.busyPerTask)}, HTTP call % ${pair((p) => p.httpShare * 100, 1)}, ` +
          `node CPU/task without the HTTP call µs ${pair((p) => p.withoutHttpPerTask)}`,
      );
    }
  }
  console.log(`load average at the end ${loadavg()}`);
  if (args.stages) for (const side of sides) await stageReport(side);
  for (const side of sides) {
    await side.pool.close();
    await side.results.stop();
  }
}

/** Journal steps between which a request's time is split, in pipeline order. */
const STAGES: Array<[from: string, to: string]> = [
  ['accepted', 'routed'],
  ['routed', 'leased'],
  ['leased', 'called'],
  ['called', 'answered'],
  ['answered', 'completed'],
  ['accepted', 'completed'],
];

/**
 * Where the time goes: each side's task journal (EVENTS=all, the default) read back from its
 * events topic, and per stage the p50 and p90 over every request of the run (warm-up included).
 * `called`/`answered` are the attempt's start and end (its event's time less its duration). The
 * journal's times are epoch ms of one clock (one process), so a stage reads to the ms only.
 */
async function stageReport(side: Side): Promise<void> {
  const topic = side.env.KAFKA_TOPIC_EVENTS as string;
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.topicOffsets(topic);
  await admin.disconnect();
  let left = offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
  const steps = new Map<string, Record<string, number>>();
  const consumer = kafka.consumer({
    groupId: `${topic}-stages-${randomBytes(3).toString('hex')}`,
    maxWaitMs: 100,
  });
  const read = new Promise<void>((resolve) => {
    if (left <= 0) resolve();
    void consumer.start({
      topics: [topic],
      fromBeginning: true,
      commit: 'never',
      onBatch: async ({ records }) => {
        for (const record of records) {
          left--;
          for (const event of [JSON.parse(record.value?.toString() ?? '[]')].flat()) {
            const at = steps.get(event.requestId) ?? {};
            steps.set(event.requestId, at);
            if (event.type === 'attempt') {
              at.called ??= event.at - event.durationMs;
              at.answered ??= event.at;
            } else at[event.type] ??= event.at;
          }
        }
        if (left <= 0) resolve();
      },
    });
  });
  await Promise.race([read, new Promise((resolve) => setTimeout(resolve, 60_000))]);
  await consumer.stop();
  const parts = STAGES.map(([from, to]) => {
    const spans = [...steps.values()].flatMap((at) =>
      at[from] !== undefined && at[to] !== undefined ? [at[to] - at[from]] : [],
    );
    spans.sort((a, b) => a - b);
    const q = (p: number) => spans[Math.min(spans.length - 1, Math.floor(spans.length * p))] ?? Number.NaN;
    return `${from}→${to} ${q(0.5).toFixed(0)}/${q(0.9).toFixed(0)}`;
  });
  console.log(`stages ${side.label} (ms p50/p90, ${steps.size} requests): ${parts.join(', ')}`);
}

async function warmUp(side: Side, target: { url: string; pid: number }): Promise<void> {
  const tracker: Tracker = {
    prefix: `${side.label}-warm-`,
    sentAt: new Map(),
    histogram: newHistogram(),
    done: 0,
    lastAt: 0,
  };
  side.results.current = tracker;
  const done = new Promise<void>((resolve) => {
    tracker.onDone = resolve;
  });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${side.token}` };
  await Promise.all(
    Array.from({ length: 200 }, async (_, i) => {
      const id = `${tracker.prefix}${i}`;
      tracker.sentAt.set(id, performance.now());
      const res = await side.pool.request({
        path: '/request',
        method: 'POST',
        headers,
        body: bodyOf(id, target.url, false),
      });
      await res.body.dump();
      if (res.statusCode !== 202) throw new Error(`warm-up: ${side.label} answered ${res.statusCode}`);
    }),
  );
  if (pipeline) await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 30_000))]);
  side.results.current = undefined;
}

const timer = setTimeout(
  () => {
    console.error('bench: overall time bound reached');
    process.exit(2);
  },
  (rounds * 2 + 3) * limitMs + 180_000,
);
timer.unref();
// Exiting stops the Requesters this script started (childProcesses), whether main ended or threw.
await main();
process.exit(0);
