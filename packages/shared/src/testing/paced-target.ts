import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { freePort } from './server.ts';

/**
 * Targets with a capacity, for the origin-pacing tests and benchmark (docs/architecture.md §9):
 * - `quota`: serves `perWindow` calls per fixed window of `windowMs` (counted by arrival, as a
 *   partner's rate limiter does) and answers the rest `429` with `Retry-After` and, unless
 *   `advertise: false`, `RateLimit-Policy: <per second>;w=1`;
 * - `capacity`: serves `concurrent` calls at once, each in `serviceMs`; later ones queue (first
 *   come, first served), so the latency shows the queue. `setConcurrent` changes it live.
 * Every arrival is recorded (time, status, and how long the target took to answer it: its own
 * queue and service, none of the caller's time) for the assertions; nothing is mocked.
 */
export interface PacedTarget {
  url: string;
  /**
   * Every call in arrival order: local epoch ms, the status answered, and `ms`, from its arrival
   * to its answer (the target's queue + service; NaN while unanswered).
   */
  arrivals: Array<{ at: number; status: number; path: string; ms: number }>;
  served(): number;
  refused(): number;
  setConcurrent(n: number): void;
  close(): Promise<void>;
}

export type PacedTargetSpec =
  | {
      kind: 'quota';
      perWindow: number;
      windowMs: number;
      /** Retry-After of a 429 (seconds, default 1). */
      retryAfterS?: number;
      advertise?: boolean;
    }
  | { kind: 'capacity'; concurrent: number; serviceMs: number };

export async function startPacedTarget(spec: PacedTargetSpec): Promise<PacedTarget> {
  const arrivals: PacedTarget['arrivals'] = [];
  let windowStart = 0;
  let inWindow = 0;
  let concurrent = spec.kind === 'capacity' ? spec.concurrent : 0;
  let busy = 0;
  const line: Array<() => void> = [];
  const next = () => {
    while (busy < concurrent && line.length > 0) {
      busy++;
      line.shift()?.();
    }
  };
  const server: Server = createServer((req, res) => {
    const at = Date.now();
    const arrived = performance.now();
    const path = req.url ?? '/';
    req.resume();
    if (spec.kind === 'quota') {
      const window = Math.floor(at / spec.windowMs) * spec.windowMs;
      if (window !== windowStart) {
        windowStart = window;
        inWindow = 0;
      }
      const allowed = inWindow < spec.perWindow;
      if (allowed) inWindow++;
      const status = allowed ? 200 : 429;
      arrivals.push({ at, status, path, ms: performance.now() - arrived });
      const headers: Record<string, string> = { 'content-type': 'text/plain' };
      if (spec.advertise !== false)
        headers['ratelimit-policy'] = `${(spec.perWindow * 1000) / spec.windowMs};w=1`;
      if (!allowed) headers['retry-after'] = String(spec.retryAfterS ?? 1);
      res.writeHead(status, headers).end(allowed ? 'ok' : 'slow down');
      return;
    }
    const arrival = { at, status: 200, path, ms: Number.NaN };
    arrivals.push(arrival);
    line.push(() =>
      setTimeout(() => {
        busy--;
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        arrival.ms = performance.now() - arrived;
        next();
      }, spec.serviceMs),
    );
    next();
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    arrivals,
    served: () => arrivals.filter((a) => a.status === 200).length,
    refused: () => arrivals.filter((a) => a.status === 429).length,
    setConcurrent: (n) => {
      concurrent = n;
      next();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A paced target in a child process: its arrival times are not skewed by the test's own event loop. */
export interface RemotePacedTarget {
  url: string;
  arrivals(): Promise<PacedTarget['arrivals']>;
  setConcurrent(n: number): void;
  close(): Promise<void>;
}

/**
 * `startPacedTarget` in a child process (paced-target-process.ts): the test process runs
 * executors, Kafka clients and collectors, and a target sharing their event loop would see calls
 * sent evenly arrive in bunches whenever that loop is busy. A partner's server has its own.
 */
export async function startPacedTargetProcess(spec: PacedTargetSpec): Promise<RemotePacedTarget> {
  const script = join(import.meta.dirname, 'paced-target-process.ts');
  const child = fork(script, [JSON.stringify(spec)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const replies: Array<(message: unknown) => void> = [];
  child.on('message', (message) => replies.shift()?.(message));
  const ask = <T>(message: unknown) =>
    new Promise<T>((resolve) => {
      replies.push(resolve as (message: unknown) => void);
      if (message !== undefined) child.send(message as string);
    });
  const { url } = await ask<{ url: string }>(undefined);
  return {
    url,
    arrivals: () => ask<{ arrivals: PacedTarget['arrivals'] }>({ op: 'arrivals' }).then((r) => r.arrivals),
    setConcurrent: (n) => child.send({ op: 'concurrent', n }),
    close: async () => {
      const exited = once(child, 'exit');
      child.send({ op: 'close' });
      await exited;
    },
  };
}
