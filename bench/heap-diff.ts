// What grew between heap snapshots of one process (bench/soak.ts --heap-snapshots writes them).
//
//   node --max-old-space-size=4096 bench/heap-diff.ts A.heapsnapshot B.heapsnapshot [C.heapsnapshot]
//        [--top 30] [--retainers NAME[,NAME...]] [--depth 3]
//
// - Groups every node by type and name (a JS object's name is its constructor) and prints the
//   groups whose count or self size grew most from A to B.
// - "Survivors": the nodes of the last snapshot that were allocated after A (V8's node ids only
//   increase within a process), by group. With three snapshots, those allocated between A and B
//   and still alive at C: what a steady load allocates and never lets go of.
// - --retainers NAME: for the survivors of a group, who holds them (retainer group and edge name),
//   --depth levels up (each node's first retainer): the Map, cache or closure to look at.
import { readFileSync } from 'node:fs';
import { parseBenchArgs } from './harness.ts';

const {
  values: args,
  positionals,
  fail,
} = parseBenchArgs({
  usage: `What grew between heap snapshots of one process (bench/soak.ts --heap-snapshots writes them).

  node --max-old-space-size=4096 bench/heap-diff.ts A.heapsnapshot B.heapsnapshot [C.heapsnapshot]
       [--top 30] [--retainers NAME[,NAME...]] [--depth 3]

- Groups every node by type and name (a JS object's name is its constructor) and prints the
  groups whose count or self size grew most from A to B.
- "Survivors": the nodes of the last snapshot that were allocated after A, by group. With three
  snapshots, those allocated between A and B and still alive at C.

As run for docs/benchmarks/memory.md:
  pnpm run bench:heap-diff -- A.heapsnapshot B.heapsnapshot --retainers '(string)' --depth 5`,
  positionals: 'A.heapsnapshot B.heapsnapshot [C.heapsnapshot]',
  options: {
    top: { type: 'string', default: '30', value: 'N', number: true, help: 'groups printed per table' },
    retainers: {
      type: 'string',
      default: '',
      value: 'NAME[,NAME...]',
      help: 'for the survivors of these groups, who holds them (retainer group and edge name)',
    },
    depth: { type: 'string', default: '3', value: 'N', number: true, help: 'levels of --retainers, up' },
  },
});
if (positionals.length < 2) fail('two or three .heapsnapshot files are required (A B [C])');
const top = Number(args.top);
const depth = Number(args.depth);

interface Snapshot {
  file: string;
  nodeCount: number;
  /** Per node: group key, self size, id. */
  group: string[];
  size: Float64Array;
  id: Float64Array;
  /** Retainers of each node (node indexes), with the edge's name; built on demand. */
  retainedBy?: Array<Array<{ from: number; edge: string }>>;
  raw: RawSnapshot;
}

interface RawSnapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

function load(file: string): Snapshot {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as RawSnapshot;
  const meta = raw.snapshot.meta;
  const nf = meta.node_fields.length;
  const [TYPE, NAME, ID, SIZE] = ['type', 'name', 'id', 'self_size'].map((f) =>
    meta.node_fields.indexOf(f),
  ) as [number, number, number, number];
  const types = meta.node_types[0];
  const nodeCount = raw.nodes.length / nf;
  const group: string[] = new Array(nodeCount);
  const size = new Float64Array(nodeCount);
  const id = new Float64Array(nodeCount);
  for (let i = 0; i < nodeCount; i++) {
    const at = i * nf;
    const type = types[raw.nodes[at + TYPE] as number] as string;
    const name = raw.strings[raw.nodes[at + NAME] as number] as string;
    // Strings and numbers are grouped by type alone: their "name" is their content.
    group[i] =
      type === 'string' || type === 'concatenated string' || type === 'sliced string' || type === 'number'
        ? `(${type})`
        : `${type}: ${name.length > 80 ? `${name.slice(0, 80)}…` : name}`;
    size[i] = raw.nodes[at + SIZE] as number;
    id[i] = raw.nodes[at + ID] as number;
  }
  return { file, nodeCount, group, size, id, raw };
}

function retainers(s: Snapshot): Array<Array<{ from: number; edge: string }>> {
  if (s.retainedBy) return s.retainedBy;
  const meta = s.raw.snapshot.meta;
  const nf = meta.node_fields.length;
  const ef = meta.edge_fields.length;
  const EDGE_COUNT = meta.node_fields.indexOf('edge_count');
  const [TYPE, NAME, TO] = ['type', 'name_or_index', 'to_node'].map((f) => meta.edge_fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const edgeTypes = meta.edge_types[0];
  const by: Array<Array<{ from: number; edge: string }>> = Array.from({ length: s.nodeCount }, () => []);
  let e = 0;
  for (let i = 0; i < s.nodeCount; i++) {
    const count = s.raw.nodes[i * nf + EDGE_COUNT] as number;
    for (let k = 0; k < count; k++, e += ef) {
      const type = edgeTypes[s.raw.edges[e + TYPE] as number] as string;
      if (type === 'weak') continue;
      const nameOrIndex = s.raw.edges[e + NAME] as number;
      const edge =
        type === 'element' || type === 'hidden'
          ? `[${type}]`
          : String(s.raw.strings[nameOrIndex] ?? nameOrIndex);
      by[(s.raw.edges[e + TO] as number) / nf]?.push({ from: i, edge });
    }
  }
  s.retainedBy = by;
  return by;
}

interface Tally {
  count: number;
  bytes: number;
}

function tally(s: Snapshot, keep: (i: number) => boolean = () => true): Map<string, Tally> {
  const out = new Map<string, Tally>();
  for (let i = 0; i < s.nodeCount; i++) {
    if (!keep(i)) continue;
    const key = s.group[i] as string;
    const t = out.get(key) ?? { count: 0, bytes: 0 };
    t.count++;
    t.bytes += s.size[i] as number;
    out.set(key, t);
  }
  return out;
}

const kb = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
const total = (t: Map<string, Tally>) => [...t.values()].reduce((sum, x) => sum + x.bytes, 0);

function printGrowth(a: Snapshot, b: Snapshot): void {
  const ta = tally(a);
  const tb = tally(b);
  console.log(`\n== growth ${a.file} → ${b.file}: self size ${kb(total(ta))} → ${kb(total(tb))}`);
  const rows = [...new Set([...ta.keys(), ...tb.keys()])].map((key) => {
    const x = ta.get(key) ?? { count: 0, bytes: 0 };
    const y = tb.get(key) ?? { count: 0, bytes: 0 };
    return { key, dCount: y.count - x.count, dBytes: y.bytes - x.bytes, count: y.count };
  });
  rows.sort((p, q) => q.dBytes - p.dBytes);
  for (const r of rows.slice(0, top))
    console.log(
      `${kb(r.dBytes).padStart(12)} ${String(r.dCount).padStart(9)} objects (now ${r.count})  ${r.key}`,
    );
}

function maxId(s: Snapshot): number {
  let max = 0;
  for (const v of s.id) if (v > max) max = v;
  return max;
}

function printSurvivors(last: Snapshot, after: number, before: number, label: string): Map<string, number[]> {
  const keep = (i: number) => (last.id[i] as number) > after && (last.id[i] as number) <= before;
  const t = tally(last, keep);
  console.log(`\n== survivors in ${last.file}: allocated ${label}, still alive: ${kb(total(t))}`);
  const rows = [...t.entries()].sort((p, q) => q[1].bytes - p[1].bytes);
  for (const [key, v] of rows.slice(0, top))
    console.log(`${kb(v.bytes).padStart(12)} ${String(v.count).padStart(9)}  ${key}`);
  const members = new Map<string, number[]>();
  for (let i = 0; i < last.nodeCount; i++) {
    if (!keep(i)) continue;
    const key = last.group[i] as string;
    const list = members.get(key) ?? [];
    list.push(i);
    members.set(key, list);
  }
  return members;
}

function printRetainers(s: Snapshot, members: Map<string, number[]>, wanted: string[]): void {
  const by = retainers(s);
  for (const name of wanted) {
    const nodes = [...members.entries()].filter(([key]) => key.includes(name)).flatMap(([, list]) => list);
    console.log(`\n== retainers of ${nodes.length} survivors matching "${name}" (holder ← its holder ← ...)`);
    const paths = new Map<string, number>();
    for (const i of nodes) {
      for (const r of (by[i] ?? []).slice(0, 3)) {
        let key = `${s.group[r.from]} .${r.edge}`;
        let at = r.from;
        for (let level = 1; level < depth; level++) {
          const up = (by[at] ?? [])[0];
          if (!up) break;
          key += ` ← ${s.group[up.from]} .${up.edge}`;
          at = up.from;
        }
        paths.set(key, (paths.get(key) ?? 0) + 1);
      }
    }
    for (const [key, n] of [...paths.entries()].sort((p, q) => q[1] - p[1]).slice(0, 15))
      console.log(`${String(n).padStart(9)}  ${key}`);
  }
}

const snapshots = positionals.map(load);
const [a, b, c] = snapshots as [Snapshot, Snapshot, Snapshot | undefined];
printGrowth(a, b);
if (c) printGrowth(b, c);
const last = c ?? b;
const members = c
  ? printSurvivors(c, maxId(a), maxId(b), 'between the first two snapshots')
  : printSurvivors(b, maxId(a), Number.POSITIVE_INFINITY, 'after the first snapshot');
const wanted = (args.retainers ?? '').split(',').filter(Boolean);
if (wanted.length) printRetainers(last, members, wanted);
