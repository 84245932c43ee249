/**
 * CPU cost of the task journal's writer: what EVENTS=all adds to a process per task, measured
 * alone (no executor around it, so the machine's noise hits little else).
 *
 *   node packages/shared/bench/journal-writer-bench.ts [--tasks 10000] [--rounds 4]
 *
 * Emits an executor's events of a task (leased, attempt, completed) for `--tasks` tasks at about
 * 2,000 tasks/s, with EVENTS=all and EVENTS=off in turn (`--rounds` each, interleaved), and prints
 * the process CPU (all threads) per task of each round; the difference is the journal's cost.
 */
import { createJournal, type JournalMode } from '../src/index.ts';
import {
  createTestTopics,
  deleteLeftovers,
  parseBenchArgs,
  silentLogger,
  testKafka,
  uniqueName,
} from '../src/testing/index.ts';

const { values: args } = parseBenchArgs({
  usage: `CPU cost of the task journal's writer: what EVENTS=all adds to a process per task, measured
alone (no executor around it).

  node packages/shared/bench/journal-writer-bench.ts [--tasks 10000] [--rounds 4]

Emits an executor's events of a task (leased, attempt, completed) for --tasks tasks at about
2,000 tasks/s, with EVENTS=all and EVENTS=off in turn (--rounds each, interleaved), and prints
the process CPU per task of each round; the difference is the journal's cost.

As run for docs/benchmarks/journal.md:
  pnpm exec node packages/shared/bench/journal-writer-bench.ts --tasks 10000 --rounds 4`,
  options: {
    tasks: { type: 'string', default: '10000', value: 'N', number: true, help: 'tasks per round' },
    rounds: { type: 'string', default: '4', value: 'N', number: true, help: 'rounds of each mode' },
  },
});
const TASKS = Number(args.tasks);
const ROUNDS = Number(args.rounds);

const topic = uniqueName('bench-journal');
await createTestTopics([topic], 12);
const kafka = testKafka();
const producer = kafka.producer();
await producer.connect();

async function round(mode: JournalMode): Promise<number> {
  const journal = createJournal({ producer: async () => producer, topic, mode, logger: silentLogger });
  const before = process.cpuUsage();
  for (let i = 0; i < TASKS; i++) {
    const requestId = `${topic}-${mode}-${i}`;
    journal.emit({ type: 'leased', requestId, executor: 'bench-host/1234', tryCount: 0 });
    journal.emit({ type: 'attempt', requestId, client: 'bench', n: 1, status: 200, durationMs: 2.5 });
    journal.emit({ type: 'completed', requestId, client: 'bench', status: 200, tryCount: 1 });
    if (i % 2 === 1) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await journal.close();
  const cpu = process.cpuUsage(before);
  return (cpu.user + cpu.system) / TASKS;
}

const perTask = new Map<JournalMode, number[]>([
  ['all', []],
  ['off', []],
]);
for (let r = 1; r <= ROUNDS; r++)
  for (const mode of ['all', 'off'] as const) {
    const us = await round(mode);
    perTask.get(mode)?.push(us);
    console.log(`round ${r} EVENTS=${mode}: ${us.toFixed(1)} µs CPU per task (3 events)`);
  }
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const cost = median(perTask.get('all') ?? []) - median(perTask.get('off') ?? []);
console.log(`journal cost: ${cost.toFixed(1)} µs per task, ${(cost / 3).toFixed(1)} µs per event (medians)`);
await producer.disconnect();
const admin = kafka.admin();
await admin.connect();
for (const { partition, high } of await admin.topicOffsets(topic))
  await admin.deleteRecordsBefore(topic, partition, high).catch(() => {});
await admin.disconnect();
// Its topics: the broker keeps what a bench makes until someone deletes it.
await deleteLeftovers();
process.exit(0);
