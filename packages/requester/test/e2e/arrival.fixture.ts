import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { setPriority } from 'node:os';
import path from 'node:path';

/** One request as the target saw it: its path and when it arrived (epoch ms, µs fraction). */
export interface Arrival {
  path: string;
  at: number;
}

export interface ArrivalTarget {
  url: string;
  port: number;
  arrivals(): Promise<Arrival[]>;
  close(): Promise<void>;
}

/**
 * The target of arrival-target.fixture.ts in a child process. It runs at a higher priority where
 * the OS lets it (root): its timestamps are what is measured, and a target process waiting for a
 * core would note an arrival late, making a window look shorter than the calls made it.
 */
export async function startArrivalTarget(): Promise<ArrivalTarget> {
  const script = path.join(import.meta.dirname, 'arrival-target.fixture.ts');
  const child: ChildProcess = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  const port = Number(chunk.toString().trim());
  try {
    setPriority(child.pid!, -10);
  } catch {
    // Not allowed (not root): the timestamps are merely noisier.
  }
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    port,
    arrivals: async () => (await (await fetch(`${url}/arrivals`)).json()) as Arrival[],
    async close() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The most instants in any window [t, t + windowMs) (t at an instant: where a busiest window starts). */
export function busiestWindow(instants: readonly number[], windowMs: number): number {
  const sorted = [...instants].sort((a, b) => a - b);
  let busiest = 0;
  let end = 0;
  for (let start = 0; start < sorted.length; start++) {
    while (end < sorted.length && sorted[end]! < sorted[start]! + windowMs) end++;
    busiest = Math.max(busiest, end - start);
  }
  return busiest;
}

/** The shortest span covering `count` consecutive instants (ms): under windowMs, a window holds `count`. */
export function shortestSpan(instants: readonly number[], count: number): number {
  const sorted = [...instants].sort((a, b) => a - b);
  let shortest = Number.POSITIVE_INFINITY;
  for (let i = 0; i + count - 1 < sorted.length; i++)
    shortest = Math.min(shortest, sorted[i + count - 1]! - sorted[i]!);
  return shortest;
}

/** Calls to the target's port each executor's /metrics counts (requester_executor_origin_calls_total). */
export async function callsByExecutor(adminUrls: readonly string[], port: number): Promise<number[]> {
  return Promise.all(
    adminUrls.map(async (adminUrl) => {
      const text = await (await fetch(`${adminUrl}/metrics`)).text();
      let calls = 0;
      for (const line of text.split('\n')) {
        if (line.startsWith('requester_executor_origin_calls_total{') && line.includes(`127.0.0.1:${port}"`))
          calls += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
      return calls;
    }),
  );
}
