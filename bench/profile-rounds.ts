// A CPU profile and an allocation profile of one stretch of a process's life (a bench round, the
// warm-up and the start left out), and their summary per task.
//
// As a preload, SIGUSR2 starts both profilers and the next SIGUSR2 stops them and writes
// $TMPDIR/profile-rounds/<pid>-<n>.cpuprofile and .heapprofile (`bench/load.ts --profile-rounds`
// preloads it into each side and signals around each round; with PROFILE_ROUNDS=cpu, which
// `bench/load.ts --profile-cpu` sets, the CPU profile alone). The allocation profile is V8's
// sampling heap profiler with the objects the GC has collected kept in (`--heap-prof` keeps only
// what is still alive at the end): it estimates every byte allocated, which the box's noise cannot
// distort the way it does CPU time. With PROFILE_ROUNDS=survivors (`bench/load.ts --profile-rounds
// --env PROFILE_ROUNDS=survivors`) it keeps only what survived a scavenge: what the collector copies.
//
//   node bench/profile-rounds.ts <file.heapprofile> --tasks 10000 [--top 30]
//   node bench/profile-rounds.ts <file.cpuprofile> --tasks 10000   (busy time per task, HTTP call apart)
//
// The CPU profile of the same round, by function: `node bench/cpuprofile.ts <file.cpuprofile>`.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { tmpdir } from 'node:os';
import path from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface HeapNode {
  callFrame: CallFrame;
  selfSize: number;
  id: number;
  children: HeapNode[];
}
interface HeapProfile {
  head: HeapNode;
  samples: { size: number; nodeId: number; ordinal: number }[];
}

function preload(): void {
  // PROFILE_ROUNDS=cpu: the CPU profile alone. The allocation sampler (a stack every 16 KiB
  // allocated, the collected objects kept) costs the profiled process more CPU than the sampling
  // of its stacks does, so node CPU figures taken beside it are inflated (docs/benchmarks/executor.md,
  // "CPU per task without the HTTP call, with a profiler that does not inflate it").
  const allocations = process.env.PROFILE_ROUNDS !== 'cpu';
  const session = new Session();
  session.connect();
  let running = false;
  let stretch = 0;
  const dir = path.join(tmpdir(), 'profile-rounds');
  const post = (method: string, params?: object) =>
    new Promise<Record<string, unknown>>((resolve, reject) =>
      session.post(method, params, (error, result) =>
        error ? reject(error) : resolve((result ?? {}) as Record<string, unknown>),
      ),
    );
  const toggle = async () => {
    if (!running) {
      running = true;
      await post('Profiler.enable');
      // Alone, a sample every 4 ms (not 1): its share of the HTTP call is as good over a round of
      // thousands of tasks, for a quarter of the interruptions.
      if (!allocations) await post('Profiler.setSamplingInterval', { interval: 4_000 });
      if (allocations) {
        await post('HeapProfiler.enable');
        await post('HeapProfiler.startSampling', {
          samplingInterval: 16_384,
          includeObjectsCollectedByMajorGC: true,
          // PROFILE_ROUNDS=survivors: what outlived the young generation (promoted, or alive at
          // the end): the objects that make scavenges slow and fill the old generation.
          includeObjectsCollectedByMinorGC: process.env.PROFILE_ROUNDS !== 'survivors',
        });
      }
      await post('Profiler.start');
      return;
    }
    running = false;
    const { profile: cpu } = await post('Profiler.stop');
    const heap = allocations ? (await post('HeapProfiler.stopSampling')).profile : undefined;
    stretch += 1;
    mkdirSync(dir, { recursive: true });
    const base = path.join(dir, `${process.pid}-${stretch}`);
    if (heap) writeFileSync(`${base}.heapprofile`, JSON.stringify(heap));
    // Renamed once whole, and last: the bench waits for this name.
    writeFileSync(`${base}.tmp`, JSON.stringify(cpu));
    renameSync(`${base}.tmp`, `${base}.cpuprofile`);
  };
  process.on('SIGUSR2', () => {
    toggle().catch((error: unknown) => console.error('profile-rounds:', error));
  });
}

/** The package a frame belongs to: a node_modules package, a workspace package, Node itself. */
export function packageOf(url: string): string {
  if (!url) return '(native/V8)';
  const module = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (module) return module[1] as string;
  const workspace = /\/(packages\/[^/]+)\//.exec(url);
  if (workspace) return workspace[1] as string;
  if (url.startsWith('node:')) return 'node';
  return url;
}

/** got and the packages it calls through; with Node's http modules, "the HTTP call". */
const HTTP_PACKAGES = new Set([
  'got',
  '@sindresorhus/is',
  '@szmarczak/http-timer',
  'byte-counter',
  'cacheable-lookup',
  'cacheable-request',
  'decompress-response',
  'defer-to-connect',
  'form-data-encoder',
  'http2-wrapper',
  'keyv',
  'lowercase-keys',
  'mimic-response',
  'p-cancelable',
  'responselike',
]);
const isHttpFrame = (url: string) =>
  /^node:(_http_|http$|https$)/.test(url) || HTTP_PACKAGES.has(packageOf(url));

interface CpuProfile {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

/**
 * A CPU profile's busy time (idle excluded), and within it the time of samples with a frame of the
 * HTTP call anywhere on their stack (got and its dependencies, Node's http modules: the request
 * built and written, the response parsed and handed back), and the GC's.
 */
export function cpuSummary(file: string): {
  busyUs: number;
  httpUs: number;
  gcUs: number;
  byOwner: Map<string, number>;
} {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const http = new Map<number, boolean>();
  const inHttp = (id: number): boolean => {
    const known = http.get(id);
    if (known !== undefined) return known;
    const up = parent.get(id);
    const is = isHttpFrame(byId.get(id)?.callFrame.url ?? '') || (up !== undefined && inHttp(up));
    http.set(id, is);
    return is;
  };
  // Outside the HTTP call, a sample goes to the innermost package on its stack (Node's and V8's
  // own frames to the package that called them).
  const owner = new Map<number, string>();
  const ownerOf = (id: number): string => {
    const known = owner.get(id);
    if (known !== undefined) return known;
    const frame = byId.get(id)?.callFrame;
    const pkg = packageOf(frame?.url ?? '');
    const up = parent.get(id);
    const name =
      pkg !== 'node' && pkg !== '(native/V8)'
        ? pkg
        : up !== undefined && byId.get(up)?.callFrame.functionName !== '(root)'
          ? ownerOf(up)
          : frame?.functionName.startsWith('(')
            ? frame.functionName
            : '(Node, V8)';
    owner.set(id, name);
    return name;
  };
  const byOwner = new Map<string, number>();
  let busyUs = 0;
  let httpUs = 0;
  let gcUs = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const name = byId.get(id)?.callFrame.functionName;
    if (name === '(idle)') return;
    busyUs += us;
    let key: string;
    if (name === '(garbage collector)') {
      gcUs += us;
      key = '(garbage collector)';
    } else if (inHttp(id)) {
      httpUs += us;
      key = 'the HTTP call';
    } else key = ownerOf(id);
    byOwner.set(key, (byOwner.get(key) ?? 0) + us);
  });
  return { busyUs, httpUs, gcUs, byOwner };
}

/** Bytes allocated over an allocation profile (V8's estimate from its samples) and its sample count. */
export function allocated(file: string): { bytes: number; samples: number } {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as HeapProfile;
  let bytes = 0;
  const walk = (node: HeapNode) => {
    bytes += node.selfSize;
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  return { bytes, samples: profile.samples.length };
}

function report(file: string, tasks: number, top: number): void {
  if (file.endsWith('.cpuprofile')) {
    const { busyUs, httpUs, gcUs, byOwner } = cpuSummary(file);
    const per = (us: number) =>
      `${(us / tasks).toFixed(0)} µs per task (${((us / busyUs) * 100).toFixed(1)} %)`;
    console.log(`${file}: busy ${(busyUs / tasks).toFixed(0)} µs per task over ${tasks} tasks`);
    console.log(`  the HTTP call (got, its dependencies, node:_http_*): ${per(httpUs)}`);
    console.log(`  GC: ${per(gcUs)}`);
    console.log(`  the rest (GC included): ${per(busyUs - httpUs)}`);
    console.log('\nbusy time by part (outside the HTTP call: the innermost package on the stack)');
    for (const [k, us] of [...byOwner].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`  ${per(us).padEnd(26)} ${k}`);
    return;
  }
  const profile = JSON.parse(readFileSync(file, 'utf8')) as HeapProfile;
  const self = new Map<string, number>();
  const byPackage = new Map<string, number>();
  let total = 0;
  const label = (f: CallFrame) =>
    `${f.functionName || '(anonymous)'} ${f.url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, '~/')}:${f.lineNumber + 1}`;
  // Bytes allocated by Node or V8 builtins go to the package that called them; and every byte to the
  // innermost function of this repository's packages on its stack (whose code asked for it).
  const owner = new Map<string, number>();
  const ours = new Map<string, number>();
  const walk = (node: HeapNode, caller = '(native/V8)', own = '(none of ours)') => {
    const pkg = packageOf(node.callFrame.url);
    if (pkg !== 'node' && pkg !== '(native/V8)') caller = pkg;
    if (pkg.startsWith('packages/')) own = label(node.callFrame);
    total += node.selfSize;
    if (node.selfSize) {
      owner.set(caller, (owner.get(caller) ?? 0) + node.selfSize);
      ours.set(own, (ours.get(own) ?? 0) + node.selfSize);
      const key = label(node.callFrame);
      self.set(key, (self.get(key) ?? 0) + node.selfSize);
      const pkg = packageOf(node.callFrame.url);
      byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, caller, own);
  };
  walk(profile.head);
  const perTask = (bytes: number) => `${(bytes / tasks).toFixed(0).padStart(8)} B`;
  console.log(
    `${file}: ${(total / 1e6).toFixed(1)} MB allocated (estimated from ${profile.samples.length} samples), ${perTask(total).trim()} per task over ${tasks} tasks`,
  );
  const table = (title: string, rows: Map<string, number>) => {
    console.log(`\n${title}\n  per task   share  where`);
    for (const [k, bytes] of [...rows].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`${perTask(bytes)} ${((bytes / total) * 100).toFixed(1).padStart(5)} %  ${k}`);
  };
  table('allocated by package (self)', byPackage);
  table('allocated by package, Node and V8 builtins counted to the package calling them', owner);
  table('allocated under the innermost function of packages/* on the stack (inclusive)', ours);
  table('allocated by function (self)', self);
}

if (import.meta.main) {
  // Imported here only: the preload must not load the bench helpers into the process it profiles.
  const { parseBenchArgs } = await import('./harness.ts');
  const { values, positionals, fail } = parseBenchArgs({
    usage: `Summarises an allocation profile written by this script as a preload (bench/load.ts --profile-rounds):
bytes allocated per task, by package and by function.

  node bench/profile-rounds.ts <file.heapprofile> --tasks 10000 [--top 30]`,
    positionals: '<file.heapprofile>',
    options: {
      tasks: {
        type: 'string',
        default: '1',
        value: 'N',
        number: true,
        help: 'tasks in the profiled stretch',
      },
      top: { type: 'string', default: '30', value: 'N', number: true, help: 'rows of each table' },
    },
  });
  report(positionals[0] ?? fail('a .heapprofile file is required'), Number(values.tasks), Number(values.top));
} else {
  preload();
}
