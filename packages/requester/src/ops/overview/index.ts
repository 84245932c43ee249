import type { AdminConsole } from '../../admin-server/console.ts';

/**
 * The state of the whole service at a glance (the admin API's overview, the UI's first page):
 * queue depth per shard, the outbox, how many breakers are open, and this process's live
 * throughput (./live.ts).
 */
export async function overview(console: AdminConsole) {
  console.live.start();
  const [queue, outbox, breakers] = await Promise.all([
    console.queueAdmin().info(),
    console.outbox().catch((err: unknown) => ({ error: String(err) })),
    // Counts only: the index says open or half-open, no per-origin snapshot needed (polled every 3 s).
    console.breaker().openOrigins(1_000),
  ]);
  const latest = console.live.latest();
  return {
    queue,
    outbox,
    breakersOpen: breakers.filter((b) => b.state === 'open').length,
    breakersHalfOpen: breakers.filter((b) => b.state === 'half_open').length,
    live: latest ?? null,
  };
}

export type OverviewData = Awaited<ReturnType<typeof overview>>;

/** The chart's data, uPlot's column layout. */
export function series(console: AdminConsole) {
  console.live.start();
  const samples = console.live.samples();
  return {
    t: samples.map((s) => s.t),
    settledPerS: samples.map((s) => s.settledPerS),
    httpPerS: samples.map((s) => s.httpPerS),
    latencyMeanMs: samples.map((s) => s.latencyMeanMs),
  };
}
