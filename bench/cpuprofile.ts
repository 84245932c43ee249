// Summarises a V8 `.cpuprofile` (`node --cpu-prof`): the functions with the most self time, and
// the most inclusive time (a sample counts once per function however deep it recurses), as % of
// all samples and of the busy ones ((idle) excluded).
//
//   node bench/cpuprofile.ts <file.cpuprofile> [--top 40] [--filter packages/ingress] [--callers name [--depth 6]]
//
// --filter keeps the inclusive table to functions whose label (name, script URL) contains the
// text; --callers adds the call paths (--depth frames) that the time of functions of that name came by.
import { readFileSync } from 'node:fs';
import { parseBenchArgs } from './harness.ts';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals, fail } = parseBenchArgs({
  usage: `Summarises a V8 .cpuprofile (node --cpu-prof): the functions with the most self time, and the
most inclusive time (a sample counts once per function however deep it recurses), as % of all
samples and of the busy ones ((idle) excluded).

  node bench/cpuprofile.ts <file.cpuprofile> [--top 40] [--filter packages/ingress] [--callers name [--depth 6]]

As run for docs/benchmarks/load.md:
  node bench/cpuprofile.ts <file> [--filter …] [--callers fn]`,
  positionals: '<file.cpuprofile>',
  options: {
    top: { type: 'string', default: '40', value: 'N', number: true, help: 'rows of each table' },
    filter: {
      type: 'string',
      value: 'TEXT',
      help: 'keep the inclusive table to functions whose label (name, script URL) contains TEXT',
    },
    callers: {
      type: 'string',
      value: 'NAME',
      help: 'add the call paths the time of functions named NAME came by',
    },
    depth: { type: 'string', default: '6', value: 'N', number: true, help: 'frames of each --callers path' },
  },
});
const file =
  positionals[0] ?? fail('a .cpuprofile file is required: node bench/cpuprofile.ts <file.cpuprofile>');
const top = Number(values.top);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const label = (f: CallFrame) => {
  const where = f.url
    ? `${f.url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, '~/')}:${f.lineNumber + 1}`
    : '';
  return `${f.functionName || '(anonymous)'} ${where}`.trim();
};

const self = new Map<string, number>();
const paths = new Map<string, number>();
const inclusive = new Map<string, number>();
let total = 0;
let idle = 0;
profile.samples.forEach((id, i) => {
  const us = profile.timeDeltas[i] ?? 0;
  total += us;
  const node = byId.get(id);
  if (!node) return;
  const name = node.callFrame.functionName;
  if (name === '(idle)') idle += us;
  self.set(label(node.callFrame), (self.get(label(node.callFrame)) ?? 0) + us);
  const seen = new Set<string>();
  const stack: string[] = [];
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const key = label((byId.get(at) as ProfileNode).callFrame);
    stack.push(key);
    if (seen.has(key)) continue;
    seen.add(key);
    inclusive.set(key, (inclusive.get(key) ?? 0) + us);
  }
  const from = values.callers ? stack.findIndex((k) => k.split(' ')[0] === values.callers) : -1;
  if (from >= 0) {
    const path = stack.slice(from, from + Number(values.depth)).join('  <  ');
    paths.set(path, (paths.get(path) ?? 0) + us);
  }
});

const busy = total - idle;
const pct = (us: number, of: number) => `${((us / of) * 100).toFixed(1).padStart(5)} %`;
const table = (title: string, rows: Map<string, number>, keep: (k: string) => boolean = () => true) => {
  console.log(`\n${title}`);
  console.log('     all     busy   ms  function');
  for (const [k, us] of [...rows]
    .filter(([k]) => keep(k))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)) {
    console.log(`${pct(us, total)} ${pct(us, busy)} ${(us / 1000).toFixed(0).padStart(6)}  ${k}`);
  }
};
console.log(
  `${file}: ${(total / 1e6).toFixed(2)} s sampled, busy ${(busy / 1e6).toFixed(2)} s ((idle) excluded)`,
);
table('self time', self);
table(
  'inclusive time',
  inclusive,
  values.filter ? (k) => k.includes(values.filter as string) : (k) => !k.startsWith('(root)'),
);
if (values.callers) table(`call paths of ${values.callers}`, paths);
