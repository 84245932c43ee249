/** What a load run prints of a round: its line, its profiles, and the stages of the task journal. */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type * as hdr from 'hdr-histogram-js';
import { eventually } from '../../packages/shared/src/testing/index.ts';
import { allocated, cpuSummary } from '../profile-rounds.ts';
import type { Side } from './processes.ts';
import type { RoundProfile, RoundResult } from './round.ts';
import { kafka, pipeline, profileCpuOnly } from './settings.ts';

/** Stops the profilers of `side` (bench/profile-rounds.ts) and reads what they wrote. */
export async function roundProfile(side: Side, r: RoundResult): Promise<RoundProfile> {
  const stretch = (profiled.get(side.pid) ?? 0) + 1;
  profiled.set(side.pid, stretch);
  process.kill(side.pid, 'SIGUSR2');
  const base = path.join(tmpdir(), 'profile-rounds', `${side.pid}-${stretch}`);
  await eventually(() => existsSync(`${base}.cpuprofile`), 60_000, `${side.label}'s profiles`);
  const cpu = cpuSummary(`${base}.cpuprofile`);
  const tasks = Math.max(r.completed, 1);
  const httpShare = cpu.httpUs / Math.max(cpu.busyUs, 1);
  return {
    file: base,
    allocatedPerTask: profileCpuOnly ? Number.NaN : allocated(`${base}.heapprofile`).bytes / tasks,
    busyPerTask: cpu.busyUs / tasks,
    httpShare,
    gcShare: cpu.gcUs / Math.max(cpu.busyUs, 1),
    // The node CPU per task measured from /proc (every thread), less the HTTP call's share of the
    // profiled main thread's busy time.
    withoutHttpPerTask: ((r.cpu.node ?? Number.NaN) / tasks) * 1e6 * (1 - httpShare),
  };
}
const profiled = new Map<number, number>();

export function profileLine(r: RoundResult): string {
  const p = r.profile as RoundProfile;
  return (
    `${profileCpuOnly ? '' : `allocated ${(p.allocatedPerTask / 1024).toFixed(1)} KiB/task; `}main thread busy ${p.busyPerTask.toFixed(0)} µs/task ` +
    `(HTTP call ${(p.httpShare * 100).toFixed(1)} %, GC ${(p.gcShare * 100).toFixed(1)} %); node CPU/task without the HTTP call ` +
    `${p.withoutHttpPerTask.toFixed(0)}µs (${p.file}.*)`
  );
}

export const ms = (h: hdr.Histogram, p: number) => (h.getValueAtPercentile(p) / 1000).toFixed(1);

/**
 * One round's line. With `idlePerSecond` (the side's node CPU per second while idle, --idle-cpu),
 * also the node CPU per task beyond that fixed cost: a slow round (a loaded box) divides the
 * fixed cost among few tasks, which inflates the plain figure by its seconds per task.
 */
export function line(r: RoundResult, idlePerSecond?: number): string {
  const cpu = Object.entries(r.cpu)
    // Per accept when nothing runs the requests (--roles without the pipeline).
    .map(([k, s]) => `${k} ${((s / Math.max(pipeline ? r.completed : r.accepted, 1)) * 1e6).toFixed(0)}µs`)
    .join(', ');
  const lat = `latency→out p50 ${ms(r.latency, 50)} p99 ${ms(r.latency, 99)} ms`;
  const rtt = r.rtt ? `, reply p50 ${ms(r.rtt, 50)} p99 ${ms(r.rtt, 99)} ms` : '';
  return (
    `${r.side.padEnd(9)} accepted ${r.accepted}/${r.sent} (${r.acceptedPerSec.toFixed(0)}/s), completed ${r.completed} ` +
    `(${r.completedPerSec.toFixed(0)}/s), errors ${r.errors}${r.timedOut ? ' TIMED OUT' : ''}; ${lat}${rtt}; CPU/task: ${cpu}; ` +
    `read/task ${(r.readBytes / Math.max(pipeline ? r.completed : r.accepted, 1) / 1024).toFixed(1)} KiB` +
    (idlePerSecond === undefined
      ? ''
      : `; node beyond idle ${beyondIdleUs(r, idlePerSecond).toFixed(0)}µs/task`)
  );
}

function beyondIdleUs(r: RoundResult, idlePerSecond: number): number {
  const tasks = Math.max(pipeline ? r.completed : r.accepted, 1);
  return (((r.cpu.node ?? Number.NaN) - idlePerSecond * r.seconds) / tasks) * 1e6;
}

/** Journal steps between which a request's time is split, in pipeline order. */
const STAGES: Array<[from: string, to: string]> = [
  ['accepted', 'routed'],
  ['routed', 'leased'],
  ['leased', 'called'],
  ['called', 'answered'],
  ['answered', 'completed'],
  ['accepted', 'completed'],
];

/**
 * Where the time goes: each side's task journal (EVENTS=all, the default) read back from its
 * events topic, and per stage the p50 and p90 over every request of the run (warm-up included).
 * `called`/`answered` are the attempt's start and end (its event's time less its duration). The
 * journal's times are epoch ms of one clock (one process), so a stage reads to the ms only.
 */
export async function stageReport(side: Side): Promise<void> {
  const topic = side.env.KAFKA_TOPIC_EVENTS as string;
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.topicOffsets(topic);
  await admin.disconnect();
  let left = offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
  const steps = new Map<string, Record<string, number>>();
  const consumer = kafka.consumer({
    groupId: `${topic}-stages-${randomBytes(3).toString('hex')}`,
    maxWaitMs: 100,
  });
  const read = new Promise<void>((resolve) => {
    if (left <= 0) resolve();
    void consumer.start({
      topics: [topic],
      fromBeginning: true,
      commit: 'never',
      onBatch: async ({ records }) => {
        for (const record of records) {
          left--;
          for (const event of [JSON.parse(record.value?.toString() ?? '[]')].flat()) {
            const at = steps.get(event.requestId) ?? {};
            steps.set(event.requestId, at);
            if (event.type === 'attempt') {
              at.called ??= event.at - event.durationMs;
              at.answered ??= event.at;
            } else at[event.type] ??= event.at;
          }
        }
        if (left <= 0) resolve();
      },
    });
  });
  await Promise.race([read, new Promise((resolve) => setTimeout(resolve, 60_000))]);
  await consumer.stop();
  const parts = STAGES.map(([from, to]) => {
    const spans = [...steps.values()].flatMap((at) =>
      at[from] !== undefined && at[to] !== undefined ? [at[to] - at[from]] : [],
    );
    spans.sort((a, b) => a - b);
    const q = (p: number) => spans[Math.min(spans.length - 1, Math.floor(spans.length * p))] ?? Number.NaN;
    return `${from}→${to} ${q(0.5).toFixed(0)}/${q(0.9).toFixed(0)}`;
  });
  console.log(`stages ${side.label} (ms p50/p90, ${steps.size} requests): ${parts.join(', ')}`);
}
