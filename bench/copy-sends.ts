// What the router's copies of big batched records cost the router and the broker by how they are
// sent (docs/benchmarks/big-bodies.md, issue 47): one produce request per copy, all of a batch at
// once (as the router sent them), against one request per round of a copy per partition (as
// BodyCopies sends them now). Requester's own producer, `readByOffset`, on a topic of its own;
// the two ways alternated, CPU per copy of this process and of the broker (found by its port).
//
//   node bench/copy-sends.ts [--copies 1440] [--bytes 65536] [--partitions 12] [--rounds 4]

import { createKafka, createLogger, type OutgoingRecord } from '../packages/shared/src/index.ts';
import { processCpuSeconds } from '../packages/shared/src/testing/index.ts';
import { loadavg, parseBenchArgs, pidListeningOn } from './harness.ts';

const { values: args } = parseBenchArgs({
  usage: `CPU per big copy, one produce request each against a round of one per partition per request.

  node bench/copy-sends.ts [--copies 1440] [--bytes 65536] [--partitions 12] [--rounds 4]`,
  options: {
    copies: { type: 'string', default: '1440', value: 'N', number: true, help: 'copies per way and round' },
    bytes: { type: 'string', default: '65536', value: 'N', number: true, help: 'bytes per copy' },
    partitions: { type: 'string', default: '12', value: 'N', number: true, help: "the topic's partitions" },
    rounds: { type: 'string', default: '4', value: 'N', number: true, help: 'rounds (each runs both ways)' },
    brokers: { type: 'string', default: '127.0.0.1:9092', value: 'HOST:PORT', help: 'Kafka brokers' },
  },
});

const copies = Number(args.copies);
const partitions = Number(args.partitions);
const kafka = createKafka({
  brokers: args.brokers,
  clientId: 'bench-copy-sends',
  logger: createLogger({ level: 'silent' }),
});
const brokerPid = pidListeningOn(Number(args.brokers.split(':')[1] ?? 9092));
const topic = `bench-copy-sends-${process.pid}`;
const admin = kafka.admin();
await admin.connect();
await admin.ensureTopics([{ topic, numPartitions: partitions, replicationFactor: 1 }]);
const producer = kafka.producer();
await producer.connect();
const value = Buffer.alloc(Number(args.bytes), 'x');
const record = (partition: number): OutgoingRecord => ({ key: null, value, partition });
console.log(
  `${copies} copies of ${value.length} B per way and round, ${partitions} partitions, broker pid ${brokerPid ?? 'n/a'}; load average ${loadavg()}`,
);

const ways: Record<string, (group: OutgoingRecord[]) => Promise<unknown>> = {
  'a request per copy': (group) =>
    Promise.all(group.map((r) => producer.send(topic, [r], undefined, { readByOffset: true }))),
  'a request per round': (group) => producer.send(topic, group, undefined, { readByOffset: true }),
};
const perCopy: Record<string, Array<{ node: number; broker: number; ms: number }>> = {};
for (let round = 1; round <= Number(args.rounds); round++) {
  const order = Object.keys(ways);
  if (round % 2 === 0) order.reverse();
  for (const way of order) {
    const send = ways[way] as (group: OutgoingRecord[]) => Promise<unknown>;
    const node0 = process.cpuUsage();
    const broker0 = brokerPid === undefined ? Number.NaN : (processCpuSeconds(brokerPid) ?? Number.NaN);
    const t0 = performance.now();
    for (let i = 0; i < copies; i += partitions)
      await send(Array.from({ length: Math.min(partitions, copies - i) }, (_, p) => record(p)));
    const ms = performance.now() - t0;
    const node = process.cpuUsage(node0);
    const broker =
      brokerPid === undefined ? Number.NaN : (processCpuSeconds(brokerPid) ?? Number.NaN) - broker0;
    const row = { node: (node.user + node.system) / copies, broker: (broker * 1e6) / copies, ms };
    perCopy[way] = [...(perCopy[way] ?? []), row];
    console.log(
      `round ${round} ${way.padEnd(20)} ${Math.round(ms)} ms; CPU µs/copy: node ${Math.round(row.node)}, broker ${Math.round(row.broker)} (load average ${loadavg()})`,
    );
  }
}
const [single, rounds] = Object.values(perCopy) as Array<Array<{ node: number; broker: number; ms: number }>>;
const ratios = (f: (r: { node: number; broker: number; ms: number }) => number) =>
  (rounds ?? []).map((r, i) => (f(r) / f(single?.[i] ?? r)).toFixed(2)).join(' / ');
console.log(
  `per round / per copy, each round: node CPU ${ratios((r) => r.node)}; broker CPU ${ratios((r) => r.broker)}; wall ${ratios((r) => r.ms)}`,
);
await producer.disconnect();
await admin.deleteTopics([topic]);
await admin.disconnect();
