/**
 * How long `requester trace` / `GET /requests/{id}/events` take to find one request's events on
 * a journal topic holding a million events of the last hour.
 *
 *   node packages/shared/bench/journal-lookup-bench.ts [--events 1000000] [--partitions 12] [--lookups 20]
 *       [--one-per-record]
 *
 * Writes `--events` journal events (5 per request: accepted, routed, leased, attempt, completed, in
 * 3 records as the ingress, the router and the executor write them), their timestamps spread
 * evenly over the last hour, to a new topic of `--partitions` partitions
 * with batched produce; then looks up `--lookups` random requests the way the tools do
 * (readJournal: the key's one partition, from ListOffsets(now − 1 h), scanned forward in 16 MiB
 * fetches), each with a new fetcher (cold: connect and metadata included) and again with a warm
 * one, and once more with a 10 min window. The topic is deleted at the end.
 */
import { type JournalEvent, type OutgoingRecord, readJournal } from '../src/index.ts';
import {
  createTestTopics,
  deleteLeftovers,
  parseBenchArgs,
  testKafka,
  uniqueName,
} from '../src/testing/index.ts';

const { values: args } = parseBenchArgs({
  usage: `How long requester trace / GET /requests/{id}/events take to find one request's events on a
journal topic holding a million events of the last hour.

  node packages/shared/bench/journal-lookup-bench.ts [--events 1000000] [--partitions 12] [--lookups 20]
      [--one-per-record]

Writes --events journal events (5 per request, in 3 records as the ingress, the router and the
executor write them), spread over the last hour, to a new topic; then looks up --lookups random
requests the way the tools do (readJournal), cold and warm, and with a 10 min window. The topic is
deleted at the end.

As run for docs/benchmarks/journal.md:
  pnpm exec node packages/shared/bench/journal-lookup-bench.ts --events 1000000 --partitions 12 --lookups 20`,
  options: {
    events: { type: 'string', default: '1000000', value: 'N', number: true, help: 'journal events written' },
    partitions: {
      type: 'string',
      default: '12',
      value: 'N',
      number: true,
      help: 'partitions of the journal topic',
    },
    lookups: { type: 'string', default: '20', value: 'N', number: true, help: 'random requests looked up' },
    'one-per-record': {
      type: 'boolean',
      default: false,
      help: 'every event in a record of its own (a journal of slow requests: no two steps share a flush)',
    },
  },
});
const EVENTS = Number(args.events);
const PARTITIONS = Number(args.partitions);
const LOOKUPS = Number(args.lookups);
const PER_REQUEST = 5;
const ONE_PER_RECORD = args['one-per-record'];
const HOUR = 3_600_000;

const topic = uniqueName('bench-events');
const kafka = testKafka();
const producer = kafka.producer();

function storyOf(requestId: string, at: number): JournalEvent[] {
  return [
    { type: 'accepted', requestId, at, client: 'bench-client', channel: 'http' },
    { type: 'routed', requestId, at: at + 1, to: 'redis', due: at + 1 },
    { type: 'leased', requestId, at: at + 2, executor: 'bench-host/1234', tryCount: 0 },
    { type: 'attempt', requestId, at: at + 5, n: 1, status: 200, durationMs: 2.5 },
    { type: 'completed', requestId, at: at + 6, status: 200, tryCount: 1 },
  ];
}

async function fill(start: number): Promise<string[]> {
  const requests = Math.ceil(EVENTS / PER_REQUEST);
  const ids = Array.from({ length: requests }, (_, i) => `bench-${i.toString(36)}-${(i * 2654435761) % 1e9}`);
  const step = HOUR / requests;
  const BATCH = 2_000; // requests per produce call
  const inFlight = new Set<Promise<unknown>>();
  const began = performance.now();
  for (let first = 0; first < requests; first += BATCH) {
    const messages: OutgoingRecord[] = [];
    for (let i = first; i < Math.min(first + BATCH, requests); i++) {
      const at = Math.round(start + i * step);
      // As the processes write them: ingress [accepted], router [routed], executor [leased, attempt, completed].
      const [accepted, routed, ...executed] = storyOf(ids[i] as string, at);
      const records = ONE_PER_RECORD
        ? [accepted, routed, ...executed].map((e) => [e])
        : [[accepted], [routed], executed];
      for (const events of records)
        messages.push({
          key: ids[i] as string,
          value: JSON.stringify(events),
          timestamp: String(events[0]?.at),
        });
    }
    const sent = producer.send(topic, messages, 60_000);
    inFlight.add(sent);
    void sent.finally(() => inFlight.delete(sent));
    if (inFlight.size >= 4) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  const seconds = (performance.now() - began) / 1000;
  console.log(
    `wrote ${requests * PER_REQUEST} events (${requests} requests, ${requests * (ONE_PER_RECORD ? 5 : 3)} records) in ${seconds.toFixed(1)} s`,
  );
  return ids;
}

const newFetcher = () => testKafka(uniqueName('lookup')).fetcher({ connections: 1, cacheBytes: 0 });

async function timed(lookup: () => Promise<JournalEvent[]>): Promise<number> {
  const began = performance.now();
  const events = await lookup();
  const ms = performance.now() - began;
  if (events.length !== PER_REQUEST) throw new Error(`expected ${PER_REQUEST} events, got ${events.length}`);
  return ms;
}

function summary(label: string, ms: number[]): void {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  console.log(
    `${label}: median ${at(0.5).toFixed(0)} ms, p90 ${at(0.9).toFixed(0)} ms, max ${at(1).toFixed(0)} ms (${ms.length} lookups)`,
  );
}

await producer.connect();
await createTestTopics([topic], PARTITIONS);
try {
  const start = Date.now() - HOUR + 60_000;
  const ids = await fill(start);
  const chosen = Array.from({ length: LOOKUPS }, () => ids[Math.floor(Math.random() * ids.length)] as string);
  const cold: number[] = [];
  for (const requestId of chosen) {
    const fetcher = newFetcher();
    try {
      cold.push(await timed(() => readJournal(fetcher, topic, { requestId })));
    } finally {
      await fetcher.close();
    }
  }
  summary('lookup, last hour, new fetcher each', cold);
  const fetcher = newFetcher();
  try {
    const warm: number[] = [];
    for (const requestId of chosen) warm.push(await timed(() => readJournal(fetcher, topic, { requestId })));
    summary('lookup, last hour, warm fetcher', warm);
    const recent = ids.slice(-Math.floor(ids.length / 12));
    const narrow: number[] = [];
    for (let i = 0; i < LOOKUPS; i++) {
      const requestId = recent[Math.floor(Math.random() * recent.length)] as string;
      narrow.push(
        await timed(() => readJournal(fetcher, topic, { requestId, sinceMs: Date.now() - 600_000 })),
      );
    }
    summary('lookup, --since 10m (a request of the last 5 min), warm fetcher', narrow);
  } finally {
    await fetcher.close();
  }
} finally {
  const admin = kafka.admin();
  await admin.connect();
  await emptyTopic(admin, topic).catch((err: unknown) => console.error('empty topic:', err));
  await admin.disconnect();
  await producer.disconnect();
}
// Its topics: the broker keeps what a bench makes until someone deletes it.
await deleteLeftovers();
process.exit(0);

async function emptyTopic(admin: ReturnType<typeof kafka.admin>, name: string): Promise<void> {
  for (const { partition, high } of await admin.topicOffsets(name))
    await admin.deleteRecordsBefore(name, partition, high);
}
