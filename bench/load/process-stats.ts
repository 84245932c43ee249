/** What the processes of a load run spend: CPU, bytes read, memory (who listens on a port: ../harness.ts). */
import { readFileSync } from 'node:fs';
import { processCpuSeconds, processTreeCpuSeconds } from '../../packages/shared/src/testing/index.ts';
import { formatMemory, memoryOf } from '../memory.ts';
import type { Side } from './processes.ts';
import { executorCounts } from './settings.ts';

/** The executors' supervisor counts with its children; every other process alone. */
export const cpuOf = (key: string, pid: number) =>
  (key === 'executors' ? processTreeCpuSeconds(pid) : processCpuSeconds(pid)) ?? Number.NaN;

/**
 * Bytes a process has read (`rchar` of /proc/<pid>/io: sockets included). Per task of Requester:
 * what it receives of `in` (the router's consume, the executor's reads by offset), of Redis and of
 * the target. Unlike the rates, the load of a shared box does not move it.
 */
export function readBytesOf(pid: number): number {
  try {
    return Number(/^rchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
}

/**
 * Each side's CPU while nothing is sent, all sides over the same seconds: what it spends per
 * second whatever the load (timers, polls, heartbeats), which a slow round divides among few tasks.
 */
export async function idleCpu(sides: Side[], seconds: number): Promise<Map<string, number>> {
  const before = sides.map((side) => cpuOf('node', side.pid));
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const idle = new Map<string, number>();
  sides.forEach((side, i) => {
    const perSecond = (cpuOf('node', side.pid) - (before[i] as number)) / seconds;
    idle.set(side.label, perSecond);
    console.log(
      `idle     ${side.label.padEnd(9)} node CPU ${(perSecond * 1000).toFixed(1)} ms/s over ${seconds} s`,
    );
  });
  return idle;
}

/**
 * A side's memory, as bench/memory.ts reads it. With `--executors 1` the executor is a process of
 * its own (the supervisor runs it in-process), so it is reported apart: the per-role figures.
 */
export async function memoryOfSide(side: Side): Promise<string> {
  const own = formatMemory(await memoryOf(side.pid, side.adminUrl));
  if (!side.executorPid || !side.executorAdminUrl || executorCounts.some((n) => n !== 1)) return own;
  const executor = formatMemory(await memoryOf(side.executorPid, side.executorAdminUrl));
  return `${own}; executor ${executor}`;
}
