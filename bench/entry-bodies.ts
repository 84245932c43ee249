// Big bodies by entry: 100 B and 64 KiB tasks through the HTTP door and from producers outside
// Requester (a plain kafkajs producer, its default batching, and sends of ~1 MiB to one partition),
// each cell a fresh `bench/load.ts` run (a whole Requester, `--role all`), the cells alternated and
// their order flipped every round, so that a shared box's noise falls on all of them alike. The
// report is rates and ratios within this one run: 64 KiB / 100 B per entry (and new / baseline per
// cell with --baseline).
//
//   node bench/entry-bodies.ts [--rounds 2] [--count-small 6000] [--count-big 4000]
//        [--baseline /tmp/baseline] [--cells http,kafkajs,kafkajs-1mib] [--env K=V,...]
import { spawn } from 'node:child_process';
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
    env: { type: 'string', default: '', value: 'K=V,...', help: 'extra environment of the Requester(s)' },
    limit: { type: 'string', default: '180', value: 'S', number: true, help: 'seconds a cell may take' },
  },
});

const ENTRIES: Record<string, string[]> = {
  http: ['--mode', 'http-async', '--connections', '32'],
  kafkajs: ['--mode', 'kafka', '--producer', 'kafkajs'],
  'kafkajs-1mib': ['--mode', 'kafka', '--producer', 'kafkajs', '--batch-bytes', String(1 << 20)],
};
const BODIES = [100, 65_536];
const entries = String(args.cells).split(',').filter(Boolean);
for (const entry of entries) if (!ENTRIES[entry]) throw new Error(`unknown cell ${entry}`);
const cells = entries.flatMap((entry) => BODIES.map((body) => ({ entry, body })));
const key = (entry: string, body: number) => `${entry} ${body}`;

/** One bench/load.ts run: completed/s per side (`new`, and `baseline` with --baseline). */
function runCell(entry: string, body: number): Promise<Map<string, number>> {
  const count = body > 1024 ? args['count-big'] : args['count-small'];
  const argv = [
    path.join(import.meta.dirname, 'load.ts'),
    ...(ENTRIES[entry] as string[]),
    '--body',
    String(body),
    '--count',
    String(count),
    '--rounds',
    '1',
    '--limit',
    String(args.limit),
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
      const rates = new Map<string, number>();
      for (const match of out.matchAll(/^round \d+ (\S+)\s+accepted .*?completed (\d+) \((\d+)\/s\)(.*)$/gm))
        rates.set(match[1] as string, match[4]?.includes('TIMED OUT') ? Number.NaN : Number(match[3]));
      resolve(rates);
    });
  });
}

const rates = new Map<string, Map<string, number[]>>();
console.log(
  `entry-bodies: ${args.rounds} round(s), cells ${cells.map((c) => key(c.entry, c.body)).join(', ')}`,
);
for (let round = 1; round <= Number(args.rounds); round++) {
  const order = round % 2 ? cells : [...cells].reverse();
  for (const { entry, body } of order) {
    const load = loadavg();
    const result = await runCell(entry, body);
    for (const [side, rate] of result) {
      const bySide = rates.get(side) ?? new Map<string, number[]>();
      rates.set(side, bySide);
      bySide.set(key(entry, body), [...(bySide.get(key(entry, body)) ?? []), rate]);
    }
    const line = [...result].map(([side, rate]) => `${side} ${rate}/s`).join(', ');
    console.log(`round ${round} ${key(entry, body).padEnd(18)} ${line} (load average ${load})`);
  }
}

console.log('\n| side | entry | 100 B tasks/s | 64 KiB tasks/s | ratio 64 KiB / 100 B (per round; median) |');
console.log('|---|---|---:|---:|---:|');
for (const [side, bySide] of rates) {
  for (const entry of entries) {
    const small = bySide.get(key(entry, 100)) ?? [];
    const big = bySide.get(key(entry, 65_536)) ?? [];
    const ratios = big.map((b, i) => b / (small[i] as number));
    console.log(
      `| ${side} | ${entry} | ${small.join(' / ')} | ${big.join(' / ')} | ${ratios.map((r) => r.toFixed(2)).join(' / ')}; **${median(ratios).toFixed(2)}** |`,
    );
  }
}
if (rates.has('baseline'))
  for (const { entry, body } of cells) {
    const mine = rates.get('new')?.get(key(entry, body)) ?? [];
    const theirs = rates.get('baseline')?.get(key(entry, body)) ?? [];
    const ratios = mine.map((m, i) => m / (theirs[i] as number));
    console.log(`new / baseline ${key(entry, body)}: ${ratios.map((r) => r.toFixed(2)).join(' / ')}`);
  }
