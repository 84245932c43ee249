import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CountingTarget {
  url: string;
  port: number;
  /** The most calls of each `key` ever in flight at once. */
  most: Map<string, number>;
  /** Calls arrived so far, by `countBy` of the call (its `key` by default). */
  calls: Map<string, number>;
  /** Calls answered so far. */
  served(): number;
  close(): Promise<void>;
}

/**
 * A loopback target that counts the calls in flight per `key` query parameter as they arrive and
 * end (each answered after `holdMs`), keeping the most it ever saw per key: what a concurrency
 * limit promises, measured where it matters. A call leaves the count before its answer is
 * written, so the count never lags behind a slot its caller frees on the answer. `calls` counts
 * every arrival by `countBy` (e.g. the key and the process that called, for a share per caller).
 */
export async function startCountingTarget(
  holdMs: number,
  options: { countBy?: (req: IncomingMessage, key: string) => string } = {},
): Promise<CountingTarget> {
  const inFlight = new Map<string, number>();
  const most = new Map<string, number>();
  const calls = new Map<string, number>();
  let served = 0;
  const server: Server = createServer((req, res) => {
    const key = new URL(req.url ?? '/', 'http://t').searchParams.get('key') ?? '';
    const label = options.countBy ? options.countBy(req, key) : key;
    calls.set(label, (calls.get(label) ?? 0) + 1);
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
    calls,
    served: () => served,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
