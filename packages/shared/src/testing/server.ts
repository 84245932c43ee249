import { createServer } from 'node:net';

// The servers of a test's own (redis.ts, postgres.ts, kafka-broker.ts, redis-cluster.ts) need these and are
// re-exported by index.ts: here, not in index.ts, so that they do not import their own importer.

/**
 * A server of a test's own (startPrivateRedis, startPrivatePostgres, startPrivateKafka) that the
 * test may crash and start again on the same port and data.
 */
export interface PrivateServer {
  /** Graceful stop, waits for the exit; removes the data folder. */
  stop(): Promise<void>;
  /** `kill -9` the server (a crash: nothing flushed on the way out), waits for the exit. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and data (after `kill`). */
  restart(): Promise<void>;
}

/**
 * A TCP port that was free a moment ago, for a server whose port must be known before it starts.
 * Drawn like `freePortRange`, below the ephemeral range: a port the kernel handed out (listen on
 * 0) is one it may hand out again as the local port of any outgoing connection before the server
 * binds it, and then the server fails with EADDRINUSE.
 */
export function freePort(): Promise<number> {
  return freePortRange(1);
}

/**
 * `count` consecutive TCP ports that were free a moment ago, for a process that takes ports BASE,
 * BASE+1, … (`requester --processes N --admin-port BASE`). Drawn below Linux's ephemeral range
 * (32768+), where every outgoing connection's local port lives, so nothing but another test's
 * draw takes them in between.
 */
export async function freePortRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const base = 10_000 + Math.floor(Math.random() * (22_000 - count));
    const ports = Array.from({ length: count }, (_, i) => base + i);
    if (ports.some((port) => FETCH_BAD_PORTS.has(port))) continue;
    if ((await Promise.all(ports.map(canListen))).every(Boolean)) return base;
  }
  throw new Error(`no ${count} consecutive free ports found in 10000–32000`);
}

/**
 * The Fetch standard's "bad ports" within the range drawn from: `fetch` refuses them ("bad port")
 * before it connects, so a test server there is one its own `fetch` cannot reach.
 */
const FETCH_BAD_PORTS: ReadonlySet<number> = new Set([10080]);

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Polls `check` every 100 ms until it holds; fails after `timeoutMs` with `what`, then what
 * `context` says at that moment (e.g. the last lines a child process printed).
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  context?: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what}: not reached within ${timeoutMs} ms${context ? `\n${context()}` : ''}`);
}
