// Memory of a running Requester, for the benchmark scripts (bench/load.ts --memory, bench/soak.ts).
import { readFileSync } from 'node:fs';

/** MB (2^20 bytes) of one process. */
export interface MemorySample {
  /** Resident set (/proc): what a pod's memory limit sees. */
  rss: number;
  /** V8's heap: live objects plus garbage not collected yet, and what it reserved. */
  heapUsed: number;
  heapTotal: number;
  /** Memory V8 accounts for outside its heap: Buffers (kafkajs fetches, sockets) and the like. */
  external: number;
}

/**
 * RSS from /proc/<pid>/status; heap and external from the process's own /metrics (prom-client's
 * default gauges). RSS − heap total − external is what neither accounts for: the node binary's
 * pages, native allocations (malloc arenas, sockets, the compiler's zones) and thread stacks.
 */
export async function memoryOf(pid: number, adminUrl: string): Promise<MemorySample> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const metric = (name: string) => {
    const m = new RegExp(`^requester_${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, 'm').exec(text);
    return Number(m?.[1] ?? Number.NaN) / 2 ** 20;
  };
  return {
    rss: rssKb / 1024,
    heapUsed: metric('nodejs_heap_size_used_bytes'),
    heapTotal: metric('nodejs_heap_size_total_bytes'),
    external: metric('nodejs_external_memory_bytes'),
  };
}

export function formatMemory(m: MemorySample): string {
  const mb = (n: number) => n.toFixed(0);
  return `RSS ${mb(m.rss)} MB (heap used ${mb(m.heapUsed)}, heap total ${mb(m.heapTotal)}, external ${mb(m.external)} MB)`;
}

/** Garbage collections of one process by kind (prom-client's `nodejs_gc_duration_seconds`). */
export type GcSample = Record<string, { count: number; seconds: number }>;

/**
 * What the collector cost the main thread so far, by kind: `minor` (scavenges of the young
 * generation), `major` (mark-compact's final pause), `incremental` (marking steps run on the main
 * thread), `weakcb`. Work on V8's helper threads is not in it: that shows as node CPU only.
 */
export async function gcOf(adminUrl: string): Promise<GcSample> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const sample: GcSample = {};
  const pattern = /^requester_nodejs_gc_duration_seconds_(sum|count)\{kind="(\w+)"\} ([0-9.e+-]+)$/gm;
  for (const [, field, kind, value] of text.matchAll(pattern)) {
    const entry = sample[kind as string] ?? { count: 0, seconds: 0 };
    sample[kind as string] = entry;
    if (field === 'sum') entry.seconds = Number(value);
    else entry.count = Number(value);
  }
  return sample;
}

/** The collections between two samples, per task: "minor 120 × 0.85 ms = 5.1 µs/task, …". */
export function formatGc(before: GcSample, after: GcSample, tasks: number): string {
  return Object.entries(after)
    .map(([kind, { count, seconds }]) => {
      const n = count - (before[kind]?.count ?? 0);
      const s = seconds - (before[kind]?.seconds ?? 0);
      const each = n ? ((s / n) * 1000).toFixed(2) : '0';
      return `${kind} ${n} × ${each} ms = ${((s / Math.max(tasks, 1)) * 1e6).toFixed(1)} µs/task`;
    })
    .join(', ');
}
