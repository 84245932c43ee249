// What one pass over a 64 KiB body costs inside Node, alone (CPU per pass, the median of five
// runs): the decodes, parses, encodes and copies a big task's body goes through in the router and the
// executor, against the whole CPU such a task adds (docs/benchmarks/big-bodies.md, "The set-up").
//
//   node bench/body-passes.ts [--bytes 65536] [--passes 2000]
import { parseBenchArgs } from './harness.ts';

const { values: args } = parseBenchArgs({
  usage: `CPU per pass over one request envelope with a big body: UTF-8 decode, JSON.parse, UTF-8 encode,
a Buffer copy, JSON.stringify.

  node bench/body-passes.ts [--bytes 65536] [--passes 2000]`,
  options: {
    bytes: { type: 'string', default: '65536', value: 'N', number: true, help: 'body size' },
    passes: { type: 'string', default: '2000', value: 'N', number: true, help: 'passes per run (five runs)' },
  },
});

const body = 'x'.repeat(Number(args.bytes));
const envelope = JSON.stringify({
  request: { uri: 'http://127.0.0.1:9/ok', method: 'POST', body },
  meta: { requestId: 'r1' },
  createdAt: new Date().toISOString(),
});
const record = Buffer.from(envelope);
const text = record.toString('utf8');
const parsed = JSON.parse(text) as { request: { body: string } };
const strict = new TextDecoder('utf-8', { fatal: true });

const passes: Record<string, () => unknown> = {
  'UTF-8 decode (Buffer.toString)': () => record.toString('utf8'),
  'UTF-8 decode, checked (TextDecoder fatal)': () => strict.decode(record),
  'JSON.parse of the envelope': () => JSON.parse(text),
  'UTF-8 encode of the body (Buffer.from)': () => Buffer.from(parsed.request.body),
  'Buffer copy of the record': () => Buffer.from(record),
  'JSON.stringify of the envelope': () => JSON.stringify(parsed),
};
const n = Number(args.passes);
console.log(`envelope of ${record.length} B, ${n} passes × 5 runs`);
for (const [name, pass] of Object.entries(passes)) {
  for (let i = 0; i < 200; i++) pass();
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    const before = process.cpuUsage();
    for (let i = 0; i < n; i++) pass();
    const used = process.cpuUsage(before);
    runs.push((used.user + used.system) / n);
  }
  runs.sort((a, b) => a - b);
  console.log(
    `${name.padEnd(44)} ${(runs[2] as number).toFixed(1)} µs (min ${(runs[0] as number).toFixed(1)})`,
  );
}
