// Far schedules at volume: N wake-ups (empty `request.uri`: nobody is called) written straight to
// Kafka `in`, all scheduled for one instant beyond REDIS_HORIZON, so they wait in the PostgreSQL
// outbox; then how late their results reach `out` after that instant (first, median, last), and
// how many came early. A "send at 09:00" campaign is this shape (docs/architecture.md §5, "Staging
// ahead"). A share of them is in ordered partitions, whose order on `out` is checked too.
//
//   node bench/far-schedule.ts [--count 150000] [--ahead 53 (s)] [--ordered 100 (partitions)]
//        [--rounds 1] [--baseline <checkout>] [--env K=V,...]
//
// With --baseline <checkout> (e.g. a git worktree of main with its node_modules installed), a
// second Requester runs from that checkout and the rounds alternate between the two, the order
// flipped each round, as bench/load.ts does. Each side is a `requester --role all` child process
// on its own topics, Redis prefix and database.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import {
  createKafka,
  createLogger,
  headerText,
  type KafkaClient,
  type KafkaConsumer,
  RELAYED_FROM_HEADER,
} from '../packages/shared/src/index.ts';
import { processCpuSeconds } from '../packages/shared/src/testing/cpu.ts';
import { eventually } from '../packages/shared/src/testing/index.ts';
import { benchStackEnv, childProcesses, envPairs, exitBench, loadavg, parseBenchArgs } from './harness.ts';

const { values: args } = parseBenchArgs({
  usage: `Far schedules at volume: N wake-ups (empty request.uri: nobody is called) written straight to
Kafka in, all scheduled for one instant beyond REDIS_HORIZON, so they wait in the PostgreSQL
outbox; then how late their results reach out after that instant (first, median, last), and how
many came early. A share of them is in ordered partitions, whose order on out is checked too.

  node bench/far-schedule.ts [--count 150000] [--ahead 53 (s)] [--ordered 100 (partitions)]
       [--rounds 1] [--baseline <checkout>] [--env K=V,...]

Each side is a requester --role all child process on its own topics, Redis prefix and database.

As run for docs/benchmarks/wake-ups.md:
  pnpm run bench:far-schedule -- --count 20000 --ahead 53 --ordered 100 --rounds 2 --baseline /tmp/wt26-base`,
  options: {
    count: { type: 'string', default: '150000', value: 'N', number: true, help: 'wake-ups per round' },
    ahead: {
      type: 'string',
      default: '53',
      value: 'S',
      number: true,
      help: 'seconds ahead of now they are scheduled for',
    },
    ordered: {
      type: 'string',
      default: '100',
      value: 'N',
      number: true,
      help: 'ordered partitions the share of ordered wake-ups is spread over',
    },
    rounds: {
      type: 'string',
      default: '1',
      value: 'N',
      number: true,
      help: 'rounds (alternating with --baseline)',
    },
    baseline: {
      type: 'string',
      value: '<checkout>',
      help: 'a second Requester from that checkout (e.g. a worktree of main, node_modules installed); rounds alternate, order flipped each round',
    },
    env: { type: 'string', default: '', value: 'K=V,...', help: 'extra environment of the Requester(s)' },
    brokers: { type: 'string', default: '127.0.0.1:9092', value: 'HOST:PORT', help: 'Kafka brokers' },
  },
});
const count = Number(args.count);
const aheadMs = Number(args.ahead) * 1000;
const orderedPartitions = Number(args.ordered);
const rounds = Number(args.rounds);
const extraEnv = envPairs(args.env);
const here = path.resolve(import.meta.dirname, '..');
const kafka: KafkaClient = createKafka({
  brokers: args.brokers,
  clientId: 'bench-far',
  logger: createLogger({ level: 'silent' }),
});

const children = childProcesses();

interface Side {
  label: string;
  topicIn: string;
  topicEvents: string;
  /** The Requester process (bin/requester execs node). */
  pid: number;
  reader: OutReader;
}

async function startSide(label: string, root: string): Promise<Side> {
  const stack = await benchStackEnv({ KAFKA_BROKERS: args.brokers, LOG_LEVEL: 'warn', ...extraEnv });
  const child = spawn(path.join(root, 'packages/requester/bin/requester'), ['--role', 'all'], {
    env: { ...process.env, ...stack.env },
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
  const reader = new OutReader(stack.env.KAFKA_TOPIC_OUT as string);
  await reader.start();
  const topicEvents = stack.env.KAFKA_TOPIC_EVENTS as string;
  return {
    label,
    topicIn: stack.env.KAFKA_TOPIC_IN as string,
    topicEvents,
    pid: child.pid as number,
    reader,
  };
}

interface Round {
  prefix: string;
  dueAt: number;
  /** Arrival on `out` (epoch ms, this process's clock) per requestId. */
  seen: Map<string, number>;
  /** Per ordered partition, request number → the broker timestamp of its first result. */
  order: Map<string, Map<number, number>>;
  /** Results per requestId on `out` (more than 1: a duplicate, at-least-once). */
  copies: Map<string, number>;
  /** The tryCount of each ordered request's first result. */
  tries: Map<string, number>;
  early: number;
  onAll?: () => void;
}

/** Reads `out` from its start; records each result of the current round once. */
class OutReader {
  private readonly consumer: KafkaConsumer;
  private readonly topic: string;
  current: Round | undefined;

  constructor(topic: string) {
    this.topic = topic;
    this.consumer = kafka.consumer({
      groupId: `${topic}-far-${randomBytes(3).toString('hex')}`,
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
        const now = Date.now();
        const round = this.current;
        if (!round) return;
        for (const record of records) {
          const id = record.key?.toString() ?? '';
          if (!id.startsWith(round.prefix)) continue;
          round.copies.set(id, (round.copies.get(id) ?? 0) + 1);
          if (round.seen.has(id)) continue;
          round.seen.set(id, now);
          // The broker's timestamp is when the executor produced the result: the call happened before.
          if (Number(record.timestamp) < round.dueAt) round.early++;
          const [, partition, i] = /-(o\d+)-(\d+)$/.exec(id) ?? [];
          if (partition) {
            round.tries.set(id, tryCountOf(record.value));
            const times = round.order.get(partition) ?? new Map<number, number>();
            round.order.set(partition, times.set(Number(i), Number(record.timestamp)));
          }
        }
        if (round.seen.size >= count) round.onAll?.();
      },
    });
  }

  stop(): Promise<void> {
    return this.consumer.stop();
  }
}

/**
 * One round: every wake-up written to `in` (a tenth in ordered partitions, in order per
 * partition), all due `--ahead` seconds after the round began; then wait for every result.
 */
async function round(side: Side, n: number): Promise<string> {
  const prefix = `${side.label}-r${n}-${randomBytes(2).toString('hex')}-`;
  const dueAt = Date.now() + aheadMs;
  const scheduled = new Date(dueAt).toISOString();
  const state: Round = {
    prefix,
    dueAt,
    seen: new Map(),
    order: new Map(),
    copies: new Map(),
    tries: new Map(),
    early: 0,
  };
  const all = new Promise<void>((resolve) => {
    state.onAll = resolve;
  });
  side.reader.current = state;
  const journaledBefore = await recordsIn(side.topicEvents);
  const cpuBefore = processCpuSeconds(side.pid) ?? Number.NaN;
  let cpuAtDue = Number.NaN;
  const atDue = setTimeout(() => {
    cpuAtDue = processCpuSeconds(side.pid) ?? Number.NaN;
  }, aheadMs);
  const producer = kafka.producer();
  await producer.connect();
  const t0 = Date.now();
  const batch = 500;
  let lateWrites = 0;
  for (let from = 0; from < count; from += batch) {
    const records = [];
    for (let i = from; i < Math.min(count, from + batch); i++) {
      // Every tenth request is in one of the ordered partitions, numbered in writing order.
      const ordered = orderedPartitions > 0 && i % 10 === 0;
      const partition = ordered ? `o${(i / 10) % orderedPartitions}` : undefined;
      const requestId = ordered ? `${prefix}${partition}-${i}` : `${prefix}${i}`;
      const meta = { requestId, scheduled, ...(partition ? { partition: `!${prefix}${partition}` } : {}) };
      records.push({
        key: partition ? `!${prefix}${partition}` : requestId,
        value: JSON.stringify({ request: { uri: '', body: 'wake' }, meta }),
      });
    }
    await producer.send(side.topicIn, records, 30_000);
    // Written within REDIS_HORIZON (1 s) of the instant: queued at once, they may go ahead of an
    // earlier request of their partition the relay has not staged yet (docs/architecture.md §9).
    if (Date.now() > dueAt - 1_000) lateWrites += records.length;
  }
  await producer.disconnect();
  const written = (Date.now() - t0) / 1000;
  const limit = aheadMs + 300_000;
  await Promise.race([all, new Promise((resolve) => setTimeout(resolve, limit))]);
  clearTimeout(atDue);
  // The Requester's CPU (every role: ingress, router, relay, executor) before the instant (the
  // wake-ups written, relayed and staged) and from it on (the drain).
  const cpuEnd = processCpuSeconds(side.pid) ?? Number.NaN;
  const perWakeUp = (seconds: number) => ((seconds * 1e6) / count).toFixed(0);
  const cpu = `node CPU µs per wake-up before / after the instant ${perWakeUp(cpuAtDue - cpuBefore)} / ${perWakeUp(cpuEnd - cpuAtDue)}`;
  side.reader.current = undefined;
  const staged = await stagedBefore(side.topicIn, prefix, dueAt);
  // Every role's journal records of the round (EVENTS=all): the router's and the executor's.
  const journaled = (await recordsIn(side.topicEvents)) - journaledBefore;
  const lates = [...state.seen.values()].map((at) => at - dueAt).sort((a, b) => a - b);
  // The ordered partitions' results come one lease + produce + ack round after another: their
  // last and the unordered ones' last tell which of the two ends the drain.
  let lastOrdered = Number.NEGATIVE_INFINITY;
  let lastUnordered = Number.NEGATIVE_INFINITY;
  for (const [id, at] of state.seen) {
    if (/-o\d+-\d+$/.test(id)) lastOrdered = Math.max(lastOrdered, at - dueAt);
    else lastUnordered = Math.max(lastUnordered, at - dueAt);
  }
  const finite = (ms: number) => (Number.isFinite(ms) ? ms : undefined);
  const s = (ms: number | undefined) => (ms === undefined ? 'n/a' : `${(ms / 1000).toFixed(1)} s`);
  let reordered = 0;
  const inversions: Inversion[] = [];
  // Results of one ordered partition land on different partitions of `out` (keyed by requestId):
  // their order is the broker's timestamps of each request's *first* result (a later request's
  // first result produced strictly before an earlier one's first = reordered; a duplicate of a
  // request already answered, at-least-once, is counted apart, not as an inversion).
  for (const [partition, times] of state.order) {
    const byNumber = [...times].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < byNumber.length; i++) {
      const [earlier, earlierAt] = byNumber[i - 1] as [number, number];
      const [later, laterAt] = byNumber[i] as [number, number];
      if (laterAt >= earlierAt) continue;
      reordered++;
      inversions.push({ partition, earlier, earlierAt, later, laterAt });
    }
  }
  let duplicates = 0;
  for (const n of state.copies.values()) duplicates += n - 1;
  const why = describeInversions(inversions, state, staged.relayedAt);
  return (
    `${side.label.padEnd(9)} ${state.seen.size}/${count} results (written in ${written.toFixed(1)} s` +
    `${lateWrites ? `, ${lateWrites} within 1 s of the instant` : ''}, due ` +
    `${(aheadMs / 1000).toFixed(0)} s after the round began); late: first ${s(lates[0])}, median ` +
    `${s(lates[Math.floor(lates.length / 2)])}, last ${s(lates.at(-1))} (ordered ${s(finite(lastOrdered))}, ` +
    `unordered ${s(finite(lastUnordered))}); early ${state.early}; ` +
    `ordered partitions out of order: ${reordered}${why}; duplicate results: ${duplicates}; relayed to in before the instant: ${staged.before}/` +
    `${staged.relayed}; journal records per wake-up ${(journaled / count).toFixed(2)}; ${cpu}; load average ${loadavg()}`
  );
}

/** Records written to a topic so far (every partition's high watermark; none when it does not exist). */
async function recordsIn(topic: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const offsets = await admin.topicOffsets(topic);
    return offsets.reduce((sum, p) => sum + Number(p.high), 0);
  } catch {
    return 0;
  } finally {
    await admin.disconnect();
  }
}

/**
 * How many of the round's outbox rows the relay had put back on `in` before their instant (by the
 * broker's timestamp of each relayed copy): staged ahead, as opposed to drained after it.
 */
async function stagedBefore(topic: string, prefix: string, dueAt: number) {
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.topicOffsets(topic);
  await admin.disconnect();
  let left = offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
  const counts = { relayed: 0, before: 0, relayedAt: new Map<string, number>() };
  const consumer = kafka.consumer({
    groupId: `${topic}-staged-${randomBytes(3).toString('hex')}`,
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
          if (!record.key?.toString().includes(prefix)) continue;
          if (headerText(record.headers, RELAYED_FROM_HEADER) !== 'outbox') continue;
          counts.relayed++;
          const requestId = requestIdOf(record.value);
          if (requestId) counts.relayedAt.set(requestId, Number(record.timestamp));
          if (Number(record.timestamp) < dueAt) counts.before++;
        }
        if (left <= 0) resolve();
      },
    });
  });
  await Promise.race([read, new Promise((resolve) => setTimeout(resolve, 120_000))]);
  await consumer.stop();
  return counts;
}

interface Inversion {
  partition: string;
  earlier: number;
  earlierAt: number;
  later: number;
  laterAt: number;
}

/**
 * What the inversions were: for each pair whether either request has duplicate results, their
 * tryCounts, and which went through the outbox (relayed back to `in`) and which was queued
 * straight from its first `in` record (routed within REDIS_HORIZON of the instant); a few in full.
 */
function describeInversions(inversions: Inversion[], state: Round, relayedAt: Map<string, number>): string {
  if (inversions.length === 0) return '';
  const id = (partition: string, n: number) => `${state.prefix}${partition}-${n}`;
  const path = (requestId: string) => (relayedAt.has(requestId) ? 'outbox' : 'direct');
  const kinds = new Map<string, number>();
  const examples: string[] = [];
  for (const inv of inversions) {
    const earlier = id(inv.partition, inv.earlier);
    const later = id(inv.partition, inv.later);
    const duplicated = (state.copies.get(earlier) ?? 0) > 1 || (state.copies.get(later) ?? 0) > 1;
    const kind = `${path(earlier)}→${path(later)}${duplicated ? ' dup' : ''}`;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (examples.length < 3)
      examples.push(
        `${inv.partition} #${inv.earlier} (${path(earlier)}, relayed ${relayedAt.get(earlier) ?? '-'}, ` +
          `out ${inv.earlierAt}, try ${state.tries.get(earlier)}, copies ${state.copies.get(earlier)}) after ` +
          `#${inv.later} (${path(later)}, relayed ${relayedAt.get(later) ?? '-'}, out ${inv.laterAt}, ` +
          `try ${state.tries.get(later)}, copies ${state.copies.get(later)})`,
      );
  }
  const summary = [...kinds].map(([kind, n]) => `${n} ${kind}`).join(', ');
  return ` [earlier→later path: ${summary}; e.g. ${examples.join('; ')}]`;
}

function requestIdOf(value: Buffer | null | undefined): string | undefined {
  try {
    return JSON.parse(value?.toString() ?? '').meta?.requestId;
  } catch {
    return undefined;
  }
}

function tryCountOf(value: Buffer | null | undefined): number {
  try {
    return Number(JSON.parse(value?.toString() ?? '').meta?.tryCount);
  } catch {
    return Number.NaN;
  }
}

async function main(): Promise<void> {
  console.log(
    `far schedules: ${count} wake-ups due ${aheadMs / 1000} s ahead, ${orderedPartitions} ordered partitions ` +
      `(a tenth of the requests), ${rounds} round(s); load average ${loadavg()}`,
  );
  if (Object.keys(extraEnv).length) console.log(`extra env: ${JSON.stringify(extraEnv)}`);
  const sides = [await startSide('new', here)];
  if (args.baseline) sides.push(await startSide('baseline', path.resolve(args.baseline)));
  for (let n = 1; n <= rounds; n++) {
    const order = n % 2 ? sides : [...sides].reverse();
    for (const side of order) console.log(`round ${n} ${await round(side, n)}`);
  }
  for (const side of sides) await side.reader.stop();
}

await main();
await exitBench(0);
