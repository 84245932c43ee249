// What the scenarios share: the bench's Redis and child processes, a run's record, and the
// helpers that build tasks, merge the runs of several processes and reduce their figures.
import { randomBytes } from 'node:crypto';
import type { Progress } from '../../packages/executor/src/worker/policies.ts';
import { OriginPacer } from '../../packages/policies/src/index.ts';
import {
  createLogger,
  createRedis,
  parseRequestEnvelope,
  type RequestEnvelope,
} from '../../packages/shared/src/index.ts';
import { deleteAtExit } from '../../packages/shared/src/testing/index.ts';
import { childProcesses } from '../harness.ts';
import { PER_ORIGIN } from './settings.ts';

export const log = createLogger({ level: 'silent' });
export const spawned = childProcesses();
export const redis = createRedis({ url: 'redis://127.0.0.1:6379' });

export interface Task {
  envelope: RequestEnvelope;
  progress: Progress;
  due: number;
  /** Parked in its executor (index of `parked`), not in the queue: taking it back is no lease. */
  parkedIn?: number;
}

/**
 * What the pace gate answered, by kind, counted per second of the run (classified here, from the
 * task's reserved slot and the answer, so that the gate itself stays as it runs in the executor):
 * - fresh: a task without a reserved slot: `go` (now), `slept` (its slot within the local wait),
 *   `booked` (a later slot reserved: parked, or back to the queue), `laned` (beyond the booking
 *   horizon: no slot, told when to ask again);
 * - at slot: a task back for its reserved slot, on time: `went`, or `voided` (refused: a hold
 *   came since; it takes a new slot at the end of the line, a lease more again);
 * - late: back more than the local wait after its slot: `lane` (the late lane let it go) or
 *   `laneBooked` (a late-lane slot reserved, a lease more);
 * - `bulkhead`, `breaker`: let through by the pace, then refused by the bulkhead (the learnt
 *   concurrency limit) or the breaker (an origin not yet proven lets few calls out at once): the
 *   slot is wasted and the task goes back without one.
 */
export type GateKind =
  | 'go'
  | 'slept'
  | 'booked'
  | 'laned'
  | 'went'
  | 'voided'
  | 'lane'
  | 'laneBooked'
  | 'bulkhead'
  | 'breaker';
export type Gates = Map<number, Partial<Record<GateKind, number>>>;

export interface Run {
  leases: number;
  gates: Gates;
  results: number;
  statuses: Map<number, number>;
  /** Every call that reached a target: when it left (ms since start), its latency (ms), its URI. */
  calls: Array<{ at: number; ms: number; uri: string }>;
  /** [ms, pace calls/s, concurrency limit, latency floor ms (NaN: none yet)] of `origin`, every 100 ms. */
  samples: Array<[number, number, number, number]>;
  /** [ms, concurrency limit] of each of `alsoSampled`, sampled alike. */
  others: Map<string, Array<[number, number]>>;
  /** Epoch ms of the start. */
  startMs: number;
  endMs: number;
}

export const GATE_KINDS: GateKind[] = [
  'go',
  'slept',
  'booked',
  'laned',
  'went',
  'voided',
  'lane',
  'laneBooked',
  'bulkhead',
  'breaker',
];

export function benchPrefix(): string {
  const prefix = `bench:${randomBytes(4).toString('hex')}:`;
  deleteAtExit({ redisPrefix: prefix });
  return prefix;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

export function envelope(uri: string, id: string, retry?: RequestEnvelope['meta']['retry']): RequestEnvelope {
  return parseRequestEnvelope({ request: { uri }, meta: { requestId: id, ...(retry ? { retry } : {}) } });
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;
}

export function perSecond(points: Array<[number, number]>, endMs: number, reduce: (ys: number[]) => number) {
  const out: Array<[number, number]> = [];
  for (let s = 0; s * 1000 < endMs; s++) {
    const ys = points.filter(([x]) => x >= s * 1000 && x < (s + 1) * 1000).map(([, y]) => y);
    out.push([s + 0.5, ys.length === 0 ? 0 : reduce(ys)]);
  }
  return out;
}

/** Forgets what the pacers of a run learnt of `origins` (its executors may be other processes). */
export async function forgetOrigins(prefix: string, origins: string[]): Promise<void> {
  const forget = new OriginPacer({
    redis,
    prefix: `${prefix}pace:`,
    maxLimit: PER_ORIGIN,
    retryAfterMaxMs: 60_000,
  });
  for (const origin of origins) await forget.reset(origin);
  await forget.close();
}

/** The runs of one scenario's executor processes as one: counts summed, calls and gates merged, the samples of the first. */
export function mergeRuns(parts: Run[]): Run {
  const [first] = parts as [Run];
  const gates: Gates = new Map();
  for (const part of parts)
    for (const [second, counts] of part.gates) {
      const sum = gates.get(second) ?? {};
      for (const [kind, k] of Object.entries(counts) as Array<[GateKind, number]>)
        sum[kind] = (sum[kind] ?? 0) + k;
      gates.set(second, sum);
    }
  const statuses = new Map<number, number>();
  for (const part of parts)
    for (const [status, k] of part.statuses) statuses.set(status, (statuses.get(status) ?? 0) + k);
  // The limit as the first executor saw it (the limit is one per origin, in Redis).
  return {
    ...first,
    leases: parts.reduce((a, p) => a + p.leases, 0),
    results: parts.reduce((a, p) => a + p.results, 0),
    statuses,
    gates,
    calls: parts.flatMap((p) => p.calls).sort((a, b) => a.at - b.at),
    endMs: Math.max(...parts.map((p) => p.endMs)),
  };
}

export const BLUE = '#1f77b4';
export const ORANGE = '#ff7f0e';
export const GREEN = '#2ca02c';
export const RED = '#d62728';
export const PURPLE = '#9467bd';
