// Big bodies by entry: 100 B and 64 KiB tasks through the HTTP door and from producers outside
// Requester (a plain kafkajs producer, its default batching, and sends of ~1 MiB to one partition),
// each cell a fresh `bench/load.ts` run (a whole Requester, `--role all`), the cells alternated and
// their order flipped every round, so that a shared box's noise falls on all of them alike. The
// report is rates and ratios within this one run: 64 KiB / 100 B per entry (and new / baseline per
// cell with --baseline).
//
//   node bench/entry-bodies.ts [--rounds 2] [--count-small 6000] [--count-big 4000]
//        [--baseline /tmp/baseline] [--cells http,kafkajs,kafkajs-1mib] [--answer echo,ok] [--env K=V,...]
import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { median } from '../packages/shared/src/testing/index.ts';
import { loadavg, parseBenchArgs } from './harness.ts';

const { values: args } = parseBenchArgs({
  usage: `Big bodies by entry: 100 B and 64 KiB tasks through the HTTP door and from outside kafkajs
producers (default batching; ~1 MiB sends), each cell a fresh bench/load.ts run, alternated.

  node bench/entry-bodies.ts [--rounds 2] [--count-small 6000] [--count-big 4000] [--baseline /tmp/baseline]`,
  options: {
    rounds: { type: 'string', default: '2', value: 'N', number: true, help: 'rounds (each runs every cell)' },
    'count-small': {
      type: 'string',
      default: '6000',
      value: 'N',
      number: true,
      help: 'tasks per 100 B cell',
    },
    'count-big': { type: 'string', default: '4000', value: 'N', number: true, help: 'tasks per 64 KiB cell' },
    baseline: { type: 'string', value: '<checkout>', help: 'passed to bench/load.ts (both sides per cell)' },
    cells: {
      type: 'string',
      default: 'http,kafkajs,kafkajs-1mib',
      value: 'LIST',
      help: 'entries to measure: http (POST /request, 32 connections), kafkajs (default batching), kafkajs-1mib (1 MiB sends)',
    },
    answer: {
      type: 'string',
      default: 'echo',
      value: 'echo|ok|echo,ok',
      help: "what the test target answers (bench/load.ts --answer): the request's body (echo), or `ok`; both (echo,ok): every cell twice, the ok ones named <cell>/ok",
    },
    env: { type: 'string', default: '', value: 'K=V,...', help: 'extra environment of the Requester(s)' },
    limit: { type: 'string', default: '180', value: 'S', number: true, help: 'seconds a cell may take' },
    'idle-cpu': {
      type: 'string',
      default: '10',
      value: 'S',
      number: true,
      help: "bench/load.ts --idle-cpu: each Requester's idle CPU over S seconds, and node CPU per task beyond it (0: not measured)",
    },
    log: { type: 'string', value: 'FILE', help: "append every bench/load.ts run's own output to FILE" },
  },
});

const ENTRIES: Record<string, string[]> = {
  http: ['--mode', 'http-async', '--connections', '32'],
  kafkajs: ['--mode', 'kafka', '--producer', 'kafkajs'],
  'kafkajs-1mib': ['--mode', 'kafka', '--producer', 'kafkajs', '--batch-bytes', String(1 << 20)],
};
const BODIES = [100, 65_536];
const answers = String(args.answer).split(',').filter(Boolean);
for (const answer of answers)
  if (!['echo', 'ok'].includes(answer)) throw new Error(`unknown answer ${answer}`);
const named = String(args.cells).split(',').filter(Boolean);
for (const entry of named) if (!ENTRIES[entry]) throw new Error(`unknown cell ${entry}`);
// An entry is a cell with the target's answer: `kafkajs` (the echo), `kafkajs/ok`.
const entries = named.flatMap((cell) =>
  answers.map((answer) => (answer === 'echo' ? cell : `${cell}/${answer}`)),
);
const cells = entries.flatMap((entry) => BODIES.map((body) => ({ entry, body })));
const key = (entry: string, body: number) => `${entry} ${body}`;

interface CellResult {
  rate: number;
  /** Requester's CPU per task (µs, every thread of the process), and the shared broker's. */
  nodeUs: number;
  brokerUs: number;
  /** KiB Requester read per task (rchar: `in`, Redis, the target's answer). */
  readKiB: number;
  /** nodeUs less the process's idle CPU over the round (--idle-cpu): what a task adds. */
  beyondIdleUs: number;
}

/** One bench/load.ts run: completed/s and CPU per task per side (`new`, and `baseline` with --baseline). */
function runCell(entry: string, body: number): Promise<Map<string, CellResult>> {
  const count = body > 1024 ? args['count-big'] : args['count-small'];
  const argv = [
    path.join(import.meta.dirname, 'load.ts'),
    ...(ENTRIES[entry.split('/')[0] as string] as string[]),
    '--body',
    String(body),
    '--count',
    String(count),
    '--rounds',
    '1',
    '--limit',
    String(args.limit),
    '--answer',
    entry.split('/')[1] ?? 'echo',
    '--idle-cpu',
    String(args['idle-cpu']),
    ...(args.baseline ? ['--baseline', String(args.baseline)] : []),
    ...(args.env ? ['--env', String(args.env)] : []),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`bench/load.ts ${entry} ${body} exited ${code}:\n${out}`));
      if (args.log) appendFileSync(String(args.log), out);
      const results = new Map<string, CellResult>();
      for (const match of out.matchAll(
        /^round \d+ (\S+)\s+accepted .*?completed (\d+) \((\d+)\/s\)(.*)$/gm,
      )) {
        const rest = match[4] ?? '';
        const us = (name: string) => Number(new RegExp(`${name} (\\d+)µs`).exec(rest)?.[1] ?? Number.NaN);
        results.set(match[1] as string, {
          rate: rest.includes('TIMED OUT') ? Number.NaN : Number(match[3]),
          nodeUs: us('node'),
          brokerUs: us('broker'),
          readKiB: Number(/read\/task ([\d.]+) KiB/.exec(rest)?.[1] ?? Number.NaN),
          beyondIdleUs: Number(/beyond idle (-?\d+)µs/.exec(rest)?.[1] ?? Number.NaN),
        });
      }
      resolve(results);
    });
  });
}

const rates = new Map<string, Map<string, CellResult[]>>();
console.log(
  `entry-bodies: ${args.rounds} round(s), cells ${cells.map((c) => key(c.entry, c.body)).join(', ')}`,
);
for (let round = 1; round <= Number(args.rounds); round++) {
  const order = round % 2 ? cells : [...cells].reverse();
  for (const { entry, body } of order) {
    const load = loadavg();
    const result = await runCell(entry, body);
    for (const [side, cell] of result) {
      const bySide = rates.get(side) ?? new Map<string, CellResult[]>();
      rates.set(side, bySide);
      bySide.set(key(entry, body), [...(bySide.get(key(entry, body)) ?? []), cell]);
    }
    const line = [...result]
      .map(
        ([side, c]) =>
          `${side} ${c.rate}/s (node ${c.nodeUs} µs/task, ${c.beyondIdleUs} beyond idle, broker ${c.brokerUs}, read ${c.readKiB} KiB/task)`,
      )
      .join(', ');
    console.log(`round ${round} ${key(entry, body).padEnd(22)} ${line} (load average ${load})`);
  }
}

const ratioText = (ratios: number[]) =>
  `${ratios.map((r) => r.toFixed(2)).join(' / ')}; **${median(ratios).toFixed(2)}**`;
console.log(
  '\n| side | entry | 100 B tasks/s | 64 KiB tasks/s | ratio 64 KiB / 100 B (per round; median) | node CPU µs/task 100 B · 64 KiB | CPU ratio 100 B / 64 KiB | beyond idle: node CPU µs/task 100 B · 64 KiB | beyond idle: CPU ratio | 64 KiB: read KiB/task |',
);
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const [side, bySide] of rates) {
  for (const entry of entries) {
    const small = bySide.get(key(entry, 100)) ?? [];
    const big = bySide.get(key(entry, 65_536)) ?? [];
    const ratios = big.map((b, i) => b.rate / (small[i]?.rate as number));
    const cpuRatios = big.map((b, i) => (small[i]?.nodeUs as number) / b.nodeUs);
    const beyondRatios = big.map((b, i) => (small[i]?.beyondIdleUs as number) / b.beyondIdleUs);
    const beyond = (cs: CellResult[]) => cs.map((c) => c.beyondIdleUs).join(' / ');
    console.log(
      `| ${side} | ${entry} | ${small.map((c) => c.rate).join(' / ')} | ${big.map((c) => c.rate).join(' / ')} | ` +
        `${ratioText(ratios)} | ${small.map((c) => c.nodeUs).join(' / ')} · ${big.map((c) => c.nodeUs).join(' / ')} | ${ratioText(cpuRatios)} | ${beyond(small)} · ${beyond(big)} | ${ratioText(beyondRatios)} | ${big.map((c) => c.readKiB).join(' / ')} |`,
    );
  }
}
if (rates.has('baseline'))
  for (const { entry, body } of cells) {
    const mine = rates.get('new')?.get(key(entry, body)) ?? [];
    const theirs = rates.get('baseline')?.get(key(entry, body)) ?? [];
    const rate = mine.map((m, i) => m.rate / (theirs[i]?.rate as number));
    const cpu = mine.map((m, i) => m.nodeUs / (theirs[i]?.nodeUs as number));
    console.log(
      `new / baseline ${key(entry, body)}: rate ${ratioText(rate)}, node CPU/task ${ratioText(cpu)}`,
    );
  }
