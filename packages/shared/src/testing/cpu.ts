import { readdirSync, readFileSync } from 'node:fs';

/**
 * What the benchmarks measure with: CPU time of other processes (the broker, Redis, a child
 * Requester) from /proc, and the median of a run's rounds. Linux only, as the benchmarks are.
 */

/** USER_HZ: the unit of utime and stime in /proc/<pid>/stat (100 on Linux). */
const CLOCK_TICKS = 100;

/** The fields of /proc/<pid>/stat after the command name (field 3 first); undefined when gone. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** utime + stime of a process so far, in seconds (fields 14 and 15); undefined when it is gone. */
export function processCpuSeconds(pid: number): number | undefined {
  const fields = statFields(pid);
  return fields ? (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS : undefined;
}

/** processCpuSeconds of a process and of its live children (field 4 is the parent pid). */
export function processTreeCpuSeconds(pid: number): number | undefined {
  let total = processCpuSeconds(pid);
  if (total === undefined) return undefined;
  for (const other of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    if (statFields(Number(other))?.[1] === String(pid)) total += processCpuSeconds(Number(other)) ?? 0;
  }
  return total;
}

/** The median (the mean of the middle two for an even count; NaN for none). */
export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
