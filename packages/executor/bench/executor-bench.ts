/**
 * Executor and fetcher benchmarks against the local Kafka and Redis and a local HTTP target.
 *
 *   pnpm exec node packages/executor/bench/executor-bench.ts [--tasks 2000] [--workers 32]
 *       [--bulkhead none,process,cluster [--rounds 3]] [--events off,all [--rounds 3]]
 *       [--body-bytes 100,65536 [--rounds 3]] [--partitions none,distinct [--rounds 3]]
 *       [--inline off,on [--rounds 3]]
 *
 * Prints: fetcher latency for 1 and 100 refs (cold: its record cache disabled), then executor
 * throughput end to end (queue → fetch → HTTP → out → ack) for unordered tasks and for one
 * ordered partition. With `--bulkhead`, only the unordered run, once per bulkhead scope in turn
 * (`--rounds` times, interleaved so that the machine's drift hits every scope alike), with a cap of
 * `--workers` per origin: it never binds on the one target, so the difference is the bulkhead's own
 * cost (process: a counter; cluster: a Redis script per call and a ZREM), printed as ratios.
 * With `--events`, the same for the task journal (EVENTS): the executor writes leased, attempt and
 * completed events of every task to an events topic, batched by the journal writer, or nothing.
 * With `--body-bytes 100,65536`, the same per request body size (bytes of the POST body; the echo
 * target returns it, so the result carries it too). With `--partitions none,distinct`, the same
 * unordered against every request on an ordered partition of its own (`!p-<i>`, `--tasks` distinct
 * keys in the queue at once). With `--inline off,on`, the same with every task's `in` record read
 * back by offset against carried in the task (QUEUE_INLINE_BYTES), with the Redis memory each
 * queued task takes (`used_memory` delta over the publish, divided by the tasks).
 * Topics and Redis keys are unique per run; queue keys are purged at the end. What is measured
 * besides throughput: `support/measure.ts`.
 *
 * Recorded 2026-11-30, 2 CPUs shared with other work, Node 24.21, Kafka 4 (KRaft, local), Redis 7;
 * target, reader and executor in this one process; two runs:
 *   fetcher: 1 ref median 1.15 / 1.04 ms; 100 refs over 3 partitions median 1.79 / 2.41 ms
 *   executor unordered, 2000 tasks, 32 workers: 702 / 1021 tasks/s
 *   executor one ordered partition, 300 tasks: 251 / 171 tasks/s (one task in flight: each costs
 *   a lease, a fetch, the call, a produce and an ack in sequence)
 */
import { FairQueue, QueueAdmin } from '@requester/queue';
import { createJournal, type JournalMode } from '@requester/shared/journal';
import type { KafkaRef } from '@requester/shared/kafka';
import { createRedis } from '@requester/shared/redis';
import { encodeQueuedTask, queuePartition, taskId } from '@requester/shared/task';
import {
  createTestTopics,
  deleteAtExit,
  deleteLeftovers,
  median,
  parseBenchArgs,
  silentLogger,
  startTarget,
  testKafka,
  uniqueName,
} from '@requester/shared/testing';
import { type Bulkhead, ClusterBulkhead, LocalBulkhead } from '../src/bulkhead/index.ts';
import { createHttpClient } from '../src/http/index.ts';
import { Executor } from '../src/worker/index.ts';
import { compareVariants } from './support/compare.ts';
import { bytesRead, cacheLine, cpuMs, slow, usedMemory } from './support/measure.ts';

const { values: args } = parseBenchArgs({
  usage: `Executor and fetcher benchmarks against the local Kafka and Redis and a local HTTP target.

  pnpm exec node packages/executor/bench/executor-bench.ts [--tasks 2000] [--workers 32]
      [--bulkhead none,process,cluster [--rounds 3]] [--events off,all [--rounds 3]]
      [--body-bytes 100,65536 [--rounds 3]] [--partitions none,distinct [--rounds 3]]
      [--inline off,on [--rounds 3]]

Prints: fetcher latency for 1 and 100 refs (cold), then executor throughput end to end (queue ->
fetch -> HTTP -> out -> ack) for unordered tasks and for one ordered partition. With one of
--bulkhead, --events, --body-bytes, --partitions or --inline, only the unordered run, once per
value in turn (--rounds times, interleaved), printed as ratios to the first value.
Topics and Redis keys are unique per run; queue keys are purged at the end.

As run for docs/benchmarks/executor.md:
  pnpm exec node packages/executor/bench/executor-bench.ts --tasks 2000 --workers 32`,
  options: {
    tasks: { type: 'string', default: '2000', value: 'N', number: true, help: 'tasks per executor run' },
    workers: {
      type: 'string',
      default: '32',
      value: 'N',
      number: true,
      help: 'executor workers (and the per-origin cap with --bulkhead)',
    },
    rounds: { type: 'string', default: '3', value: 'N', number: true, help: 'rounds of each compared value' },
    bulkhead: {
      type: 'string',
      value: 'none,process,cluster',
      help: "bulkhead scopes to compare (the bulkhead's own cost: a counter, or a Redis script per call)",
    },
    events: { type: 'string', value: 'off,all', help: 'task journal modes (EVENTS) to compare' },
    'body-bytes': { type: 'string', value: '100,65536', help: 'request body sizes to compare' },
    partitions: {
      type: 'string',
      value: 'none,distinct',
      help: 'unordered against every request on an ordered partition of its own',
    },
    inline: {
      type: 'string',
      value: 'off,on',
      help: 'in records read back by offset against carried in the task (QUEUE_INLINE_BYTES), with Redis memory per task',
    },
  },
});
const TASKS = Number(args.tasks);
const WORKERS = Number(args.workers);
const ORDERED = Math.min(TASKS, 300);
const list = (text: string | undefined) => (text === undefined ? [] : text.split(','));
const SCOPES = list(args.bulkhead);
const ROUNDS = Number(args.rounds);
const EVENT_MODES = list(args.events) as JournalMode[];
const BODY_SIZES = list(args['body-bytes']).map(Number);
const PARTITION_MODES = list(args.partitions);
const INLINE_MODES = list(args.inline);

/** A Redis prefix of this run, its keys deleted at the end (with the run's topics). */
function deleted(prefix: string): string {
  deleteAtExit({ redisPrefix: prefix });
  return prefix;
}

const inTopic = uniqueName('bench-in');
const outTopic = uniqueName('bench-out');
await createTestTopics([inTopic, outTopic], 3);
const producer = testKafka().producer();
await producer.connect();
const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
const target = await startTarget();
// The target records every call with its body, for tests; nothing here reads them. Kept, 3,000
// bodies of 64 KiB grew the heap by ~200 MB a run, and the GC's marking of it was billed per task.
setInterval(() => target.calls.splice(0), 1000).unref();

/** Writes `count` envelopes round-robin over the 3 partitions; returns their refs in order. */
async function writeIn(count: number, envelope: (i: number) => object): Promise<KafkaRef[]> {
  const refs: KafkaRef[] = [];
  for (let p = 0; p < 3; p++) {
    const indexes = Array.from({ length: count }, (_, i) => i).filter((i) => i % 3 === p);
    if (indexes.length === 0) continue;
    const [meta] = await producer.send(
      inTopic,
      indexes.map((i) => ({ partition: p, value: JSON.stringify(envelope(i)) })),
      undefined,
      { readByOffset: true }, // as the ingress writes `in`
    );
    indexes.forEach((i, n) => {
      refs[i] = { topic: inTopic, partition: p, offset: String(BigInt(meta?.baseOffset ?? '0') + BigInt(n)) };
    });
  }
  return refs;
}

async function benchFetcher(): Promise<void> {
  const refs = await writeIn(300, (i) => ({
    request: { uri: '' },
    meta: { requestId: `f-${i}` },
    pad: 'x'.repeat(300),
  }));
  const fetcher = testKafka().fetcher({ cacheBytes: 0 });
  await fetcher.fetchMany([refs[0]!]); // connect + metadata
  const one: number[] = [];
  for (let i = 0; i < 50; i++) {
    const started = performance.now();
    await fetcher.fetch(refs[(i * 7) % refs.length]!);
    one.push(performance.now() - started);
  }
  const hundred: number[] = [];
  for (let i = 0; i < 10; i++) {
    const picked = Array.from({ length: 100 }, (_, n) => refs[(n * 3 + i) % refs.length]!);
    const started = performance.now();
    const outcomes = await fetcher.fetchMany(picked);
    hundred.push(performance.now() - started);
    if (outcomes.some((o) => !o.ok)) throw new Error('fetch failed');
  }
  await fetcher.close();
  console.log(
    `fetcher: 1 ref median ${median(one).toFixed(2)} ms; 100 refs over 3 partitions median ${median(hundred).toFixed(2)} ms`,
  );
}

/** The bulkhead of a scope, capped at the worker count (never binding on one origin). */
function bulkheadOf(scope: string): Bulkhead | undefined {
  if (scope === 'none') return undefined;
  if (scope === 'process') return new LocalBulkhead({ maxPerOrigin: WORKERS });
  if (scope === 'cluster')
    return new ClusterBulkhead({
      redis,
      prefix: deleted(`${uniqueName('bench-bh')}:`),
      maxPerOrigin: WORKERS,
      leaseMs: 60_000,
    });
  throw new Error(`unknown bulkhead scope ${scope}`);
}

async function benchExecutor(
  label: string,
  count: number,
  partition: (i: number) => string | undefined,
  bulkhead?: Bulkhead,
  events: JournalMode = 'off',
  bodyBytes?: number,
  inline = false,
): Promise<number> {
  const queue = new FairQueue({ redis, prefix: deleted(`${uniqueName('bench')}:`), shards: 128 });
  const run = uniqueName('run');
  const envelope = (i: number) => ({
    request: {
      uri: `${target.url}/echo?run=${run}`,
      method: 'POST',
      body: bodyBytes === undefined ? `{"i":${i}}` : `${i}:`.padEnd(bodyBytes, 'x'),
    },
    meta: { requestId: `${run}-${i}`, ...(partition(i) ? { partition: partition(i) } : {}) },
  });
  const writeStarted = performance.now();
  const refs = await writeIn(count, envelope);
  const writeMsPerTask = (performance.now() - writeStarted) / count;
  let seen = 0;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const reader = testKafka().consumer({ groupId: uniqueName('bench-reader') });
  await reader.start({
    topics: [outTopic],
    fromBeginning: false,
    commit: 'after-batch',
    onBatch: async ({ records }) => {
      for (const m of records) if (m.key?.toString().startsWith(run)) seen++;
      if (seen >= count) done();
    },
  });
  await new Promise((resolve) => setTimeout(resolve, 3_000)); // let the reader's group settle first
  const fetcher = testKafka().fetcher();
  const http = createHttpClient({
    connectTimeoutMs: 2_000,
    responseTimeoutMs: 10_000,
    maxResponseBytes: 1 << 20,
    followRedirects: false,
    allowPrivateTargets: ['127.0.0.1'],
  });
  const eventsTopic = `${outTopic}.events`;
  if (events !== 'off') await createTestTopics([eventsTopic], 12);
  // As in a process (Dependencies.journal): a producer of its own, beside the results' one.
  const journalProducer = testKafka().producer();
  if (events !== 'off') await journalProducer.connect();
  const journal = createJournal({
    producer: async () => journalProducer,
    topic: eventsTopic,
    mode: events,
    logger: silentLogger,
  });
  const executor = new Executor({
    journal,
    queue,
    fetcher,
    http,
    producer,
    topicOut: outTopic,
    maxWorkers: WORKERS,
    leaseTtlMs: 30_000,
    produceTimeoutMs: 10_000,
    logger: silentLogger,
    bulkhead,
  });
  const memoryBefore = await usedMemory(redis);
  const started = performance.now();
  const cpuBefore = await cpuMs(redis);
  const readBefore = bytesRead();
  await queue.publish(
    refs.map((ref, i) => ({
      id: taskId(undefined, `${run}-${i}`, 0),
      partition: queuePartition(undefined, partition(i), `${run}-${i}`),
      payload: encodeQueuedTask({
        ref,
        requestId: `${run}-${i}`,
        tryCount: 0,
        ...(inline ? { inline: { value: envelope(i) } } : {}),
      }),
    })),
  );
  const bytesPerTask = ((await usedMemory(redis)) - memoryBefore) / count;
  executor.start();
  // A run that stops making progress says where it stands instead of hanging.
  let lastSeen = -1;
  const watchdog = setInterval(async () => {
    if (seen !== lastSeen) {
      lastSeen = seen;
      return;
    }
    const { totals } = await new QueueAdmin(queue).info();
    console.error(
      `no progress for 10 s: ${seen}/${count} results seen, executor holds ${executor.inFlight}; queue`,
      totals,
    );
  }, 10_000);
  await finished;
  clearInterval(watchdog);
  const seconds = (performance.now() - started) / 1000;
  const cpuAfter = await cpuMs(redis);
  const readPerTask = (bytesRead() - readBefore) / count / 1024;
  const perTask = (before: number | undefined, after: number | undefined) =>
    before === undefined || after === undefined
      ? 'n/a'
      : `${(((after - before) / count) * 1000).toFixed(0)} µs`;
  console.log(
    `executor ${label}: ${count} tasks in ${seconds.toFixed(2)} s = ${(count / seconds).toFixed(0)} tasks/s (${WORKERS} workers); ` +
      `CPU per task: node ${perTask(cpuBefore.node, cpuAfter.node)} (main thread ${perTask(cpuBefore.main, cpuAfter.main)}), redis ${perTask(cpuBefore.redis, cpuAfter.redis)}, ` +
      `kafka ${perTask(cpuBefore.kafka, cpuAfter.kafka)}; Redis memory per queued task ${bytesPerTask.toFixed(0)} B; ` +
      `read per task ${readPerTask.toFixed(0)} KiB; writing in ${(writeMsPerTask * 1000).toFixed(0)} µs per task; record cache ${cacheLine(fetcher)}`,
  );
  await slow('executor.drain', executor.drain());
  await slow('journal.close', journal.close());
  if (events !== 'off') await journalProducer.disconnect();
  await Promise.all([slow('reader.disconnect', reader.stop()), slow('fetcher.close', fetcher.close())]);
  http.close();
  await new QueueAdmin(queue).purge();
  await queue.close();
  return count / seconds;
}

/** The unordered run once per bulkhead scope, ROUNDS times interleaved; then each scope's ratio to the first. */
async function benchBulkheadScopes(): Promise<void> {
  const rates = new Map<string, number[]>(SCOPES.map((scope) => [scope, []]));
  for (let round = 1; round <= ROUNDS; round++)
    for (const scope of SCOPES)
      rates
        .get(scope)
        ?.push(
          await benchExecutor(`unordered, bulkhead ${scope}`, TASKS, () => undefined, bulkheadOf(scope)),
        );
  const [base = '', ...others] = SCOPES;
  const baseRates = rates.get(base) ?? [];
  for (const scope of others) {
    const ratios = (rates.get(scope) ?? []).map((rate, i) => rate / (baseRates[i] ?? rate));
    console.log(
      `bulkhead ${scope} / ${base}: median ${median(rates.get(scope) ?? []).toFixed(0)} / ${median(baseRates).toFixed(0)} tasks/s; ` +
        `per-round ratios ${ratios.map((r) => r.toFixed(2)).join(', ')}`,
    );
  }
}

/** The unordered run once per EVENTS mode, ROUNDS times interleaved; then each mode's ratio to the first. */
async function benchEventModes(): Promise<void> {
  const rates = new Map<JournalMode, number[]>(EVENT_MODES.map((mode) => [mode, []]));
  for (let round = 1; round <= ROUNDS; round++)
    for (const mode of EVENT_MODES)
      rates
        .get(mode)
        ?.push(await benchExecutor(`unordered, EVENTS=${mode}`, TASKS, () => undefined, undefined, mode));
  const [base = 'off', ...others] = EVENT_MODES;
  const baseRates = rates.get(base) ?? [];
  for (const mode of others) {
    const ratios = (rates.get(mode) ?? []).map((rate, i) => rate / (baseRates[i] ?? rate));
    console.log(
      `EVENTS=${mode} / ${base}: median ${median(rates.get(mode) ?? []).toFixed(0)} / ${median(baseRates).toFixed(0)} tasks/s; ` +
        `per-round ratios ${ratios.map((r) => r.toFixed(2)).join(', ')}; median ratio ${median(ratios).toFixed(2)}`,
    );
  }
}

/** The unordered run once per body size, ROUNDS times interleaved; then each size's ratio to the first. */
async function benchBodySizes(): Promise<void> {
  await compareVariants(
    ROUNDS,
    BODY_SIZES.map((bytes) => `body ${bytes} B`),
    (i) =>
      benchExecutor(
        `unordered, body ${BODY_SIZES[i]} B`,
        TASKS,
        () => undefined,
        undefined,
        'off',
        BODY_SIZES[i],
      ),
  );
}

/** Unordered against a partition of its own per request (`!p-<i>`), ROUNDS times interleaved. */
async function benchPartitionModes(): Promise<void> {
  const partitionOf = (mode: string) => {
    if (mode === 'none') return () => undefined;
    if (mode === 'distinct') return (i: number) => `!p-${i}`;
    throw new Error(`unknown partition mode ${mode}`);
  };
  await compareVariants(
    ROUNDS,
    PARTITION_MODES.map((mode) => `partitions ${mode}`),
    (i) => benchExecutor(`partitions ${PARTITION_MODES[i]}`, TASKS, partitionOf(PARTITION_MODES[i] ?? '')),
  );
}

/** The `in` record read back by offset against carried in the task, ROUNDS times interleaved. */
async function benchInlineModes(): Promise<void> {
  await compareVariants(
    ROUNDS,
    INLINE_MODES.map((mode) => `inline ${mode}`),
    (i) =>
      benchExecutor(
        `inline ${INLINE_MODES[i]}`,
        TASKS,
        () => undefined,
        undefined,
        'off',
        undefined,
        INLINE_MODES[i] === 'on',
      ),
  );
}

try {
  if (SCOPES.length > 0) await benchBulkheadScopes();
  else if (EVENT_MODES.length > 0) await benchEventModes();
  else if (BODY_SIZES.length > 0) await benchBodySizes();
  else if (PARTITION_MODES.length > 0) await benchPartitionModes();
  else if (INLINE_MODES.length > 0) await benchInlineModes();
  else {
    await benchFetcher();
    await benchExecutor('unordered', TASKS, () => undefined);
    await benchExecutor('one ordered partition', ORDERED, () => '!bench');
  }
} finally {
  await slow('leftovers', deleteLeftovers());
  await slow('producer.disconnect', producer.disconnect());
  await slow('target.close', target.close());
  redis.disconnect();
}
// Everything is closed: a process still alive 3 s later has leaked a handle. Say which, and exit
// (now and then a kafkajs socket to the broker outlives its client's disconnect; the requester
// itself ends with process.exit, so only this script would hang on it).
setTimeout(() => {
  const handles = (
    process as unknown as { _getActiveHandles(): Array<Record<string, unknown>> }
  )._getActiveHandles();
  const sockets = handles.map(
    (h) =>
      `${h.constructor?.name} :${String(h.localPort)} -> ${String(h.remoteAddress)}:${String(h.remotePort)}`,
  );
  console.error('handles still open after teardown:', sockets);
  process.exit(0);
}, 3_000).unref();
