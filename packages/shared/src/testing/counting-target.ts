import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CountingTarget {
  url: string;
  port: number;
  /** The most calls of each `key` ever in flight at once. */
  most: Map<string, number>;
  /** Calls answered so far. */
  served(): number;
  close(): Promise<void>;
}

/**
 * A loopback target that counts the calls in flight per `key` query parameter as they arrive and
 * end (each answered after `holdMs`), keeping the most it ever saw per key: what a concurrency
 * limit promises, measured where it matters. A call leaves the count before its answer is
 * written, so the count never lags behind a slot its caller frees on the answer.
 */
export async function startCountingTarget(holdMs: number): Promise<CountingTarget> {
  const inFlight = new Map<string, number>();
  const most = new Map<string, number>();
  let served = 0;
  const server: Server = createServer((req, res) => {
    const key = new URL(req.url ?? '/', 'http://t').searchParams.get('key') ?? '';
    const now = (inFlight.get(key) ?? 0) + 1;
    inFlight.set(key, now);
    most.set(key, Math.max(most.get(key) ?? 0, now));
    req.resume();
    setTimeout(() => {
      inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
      served += 1;
      res.end('ok');
    }, holdMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    most,
    served: () => served,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
