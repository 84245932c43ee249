/**
 * What the relay turn across processes (Outbox.takeTurn, an advisory lock held from claim to
 * produce) costs: how fast one and two relay processes empty an outbox of due rows, with the turn
 * and without it (each process's workers still take turns among themselves, as before).
 *
 *   node packages/relay/bench/relay-bench.ts [--rows 20000] [--workers 2] [--batch 500] [--rounds 4]
 *
 * Each case gets a fresh schema on the test database and a fresh topic (12 partitions); a
 * "process" is a Relay with a PostgreSQL pool and a Kafka producer of its own. Cases alternate,
 * `--rounds` times, in reverse order every other round. A rate is rows over the time from the relays' start to an
 * empty outbox; "late" counts records of `in` that came after a later row of their partition.
 */
import { cpus, loadavg } from 'node:os';
import { Relay } from '../../relay/src/relay/index.ts';
import {
  createPg,
  type KafkaProducer,
  migrate,
  Outbox,
  type OutboxRow,
  type Sql,
} from '../../shared/src/index.ts';
import {
  createTestTopics,
  deleteLeftovers,
  parseBenchArgs,
  readTopic,
  silentLogger,
  TEST_DATABASE_URL,
  testKafka,
  uniqueName,
} from '../../shared/src/testing/index.ts';

const { values: args } = parseBenchArgs({
  usage: `How fast one and two relay processes empty an outbox of due rows, with the turn across
processes (an advisory lock from claim to produce) and without it.

  node packages/relay/bench/relay-bench.ts [--rows 20000] [--workers 2] [--batch 500] [--rounds 4]

As run for BENCHMARKS.md:
  pnpm exec node packages/relay/bench/relay-bench.ts --rows 20000 --rounds 4`,
  options: {
    rows: { type: 'string', default: '20000', value: 'N', number: true, help: 'due rows in the outbox' },
    workers: { type: 'string', default: '2', value: 'N', number: true, help: 'RELAY_WORKERS per process' },
    batch: { type: 'string', default: '500', value: 'N', number: true, help: 'RELAY_BATCH' },
    rounds: { type: 'string', default: '4', value: 'N', number: true, help: 'times each case runs' },
  },
});
const ROWS = Number(args.rows);
const WORKERS = Number(args.workers);
const BATCH = Number(args.batch);
const ROUNDS = Number(args.rounds);
/** Ordered partitions the rows are spread over (their Kafka keys). */
const PARTITIONS = 200;

/** The relay as it was: no turn across processes (the in-process turn is the Relay's own). */
class OutboxWithoutTurns extends Outbox {
  override async takeTurn(): Promise<() => Promise<void>> {
    return async () => {};
  }
}

interface Case {
  processes: number;
  turns: boolean;
}

/** Records of `in` that came after a later row of their ordered partition (their rows' order is their number's). */
async function lateRecords(topic: string): Promise<number> {
  const records = await readTopic(topic, (messages) => messages.length >= ROWS, 120_000);
  const highest = new Map<string, number>();
  let late = 0;
  for (const record of records) {
    const key = String(record.key);
    const n = Number(String(JSON.parse(String(record.value)).meta.requestId).slice(1));
    if (n < (highest.get(key) ?? -1)) late++;
    else highest.set(key, n);
  }
  return late;
}

async function runCase({ processes, turns }: Case): Promise<{ rate: number; late: number }> {
  const schema = uniqueName('bench_relay').replaceAll('-', '_');
  const topic = uniqueName('bench.relay');
  await createTestTopics([topic], 12);
  const pools: Sql[] = Array.from({ length: processes }, () =>
    createPg({ url: TEST_DATABASE_URL, max: 10, schema }),
  );
  const admin = pools[0] as Sql;
  await migrate(admin, undefined, schema);
  const producers: KafkaProducer[] = [];
  try {
    const now = Date.now();
    const payload = (id: string, partition: string) =>
      Buffer.from(
        JSON.stringify({
          request: { uri: 'http://127.0.0.1:1/x' },
          meta: { requestId: id, partition },
        }).padEnd(400),
      );
    for (let from = 0; from < ROWS; from += 5_000) {
      const rows: OutboxRow[] = [];
      for (let i = from; i < Math.min(ROWS, from + 5_000); i++) {
        const partition = `!p${i % PARTITIONS}`;
        rows.push({
          taskId: `r${i}:0`,
          requestId: `r${i}`,
          dueAt: new Date(now - 60_000 + Math.floor(i / PARTITIONS)),
          topic,
          key: partition,
          payload: payload(`r${i}`, partition),
        });
      }
      await new Outbox(admin).add(rows);
    }
    const relays = await Promise.all(
      pools.map(async (sql) => {
        const producer = testKafka().producer();
        await producer.connect();
        producers.push(producer);
        return new Relay({
          outbox: turns ? new Outbox(sql) : new OutboxWithoutTurns(sql),
          producer,
          logger: silentLogger,
          workers: WORKERS,
          batch: BATCH,
          produceTimeoutMs: 30_000,
        });
      }),
    );
    const startedAt = performance.now();
    await Promise.all(relays.map((relay) => relay.start()));
    const outbox = new Outbox(admin);
    while ((await outbox.count()) > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    const seconds = (performance.now() - startedAt) / 1000;
    await Promise.all(relays.map((relay) => relay.stop()));
    return { rate: ROWS / seconds, late: await lateRecords(topic) };
  } finally {
    await Promise.all(producers.map((producer) => producer.disconnect()));
    await admin.unsafe(`drop schema if exists "${schema}" cascade`);
    await Promise.all(pools.map((sql) => sql.end({ timeout: 5 })));
  }
}

const cases: Case[] = [
  { processes: 1, turns: false },
  { processes: 1, turns: true },
  { processes: 2, turns: false },
  { processes: 2, turns: true },
];
const results = new Map<string, Array<{ rate: number; late: number }>>();
const label = (c: Case) =>
  `${c.processes} process${c.processes > 1 ? 'es' : ''}, ${c.turns ? 'turn across processes' : 'no turn across processes (before)'}`;
console.log(
  `${new Date().toISOString()} rows ${ROWS} (${PARTITIONS} ordered partitions), RELAY_WORKERS ${WORKERS}, RELAY_BATCH ${BATCH}, ${cpus().length} cores, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
for (let round = 0; round < ROUNDS; round++) {
  for (const c of round % 2 === 0 ? cases : [...cases].reverse()) {
    const result = await runCase(c);
    results.set(label(c), [...(results.get(label(c)) ?? []), result]);
    console.log(
      `round ${round + 1}: ${label(c)}: ${Math.round(result.rate)} rows/s, ${result.late} records late`,
    );
  }
}
console.log(
  '\n| case | rows/s per round | records on `in` behind a later row of their partition |\n|---|---|---|',
);
for (const [name, runs] of results)
  console.log(
    `| ${name} | ${runs.map((r) => Math.round(r.rate)).join(' / ')} | ${runs.map((r) => r.late).join(' / ')} |`,
  );
console.log(
  `load average at the end ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
// Its topics: the broker keeps what a bench makes until someone deletes it.
await deleteLeftovers();
process.exit(0);
