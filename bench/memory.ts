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
