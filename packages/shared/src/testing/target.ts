import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP target for tests, on 127.0.0.1 with a free port. Behaviour is chosen by the path, so
 * one server can play every part: `/echo` (200 with the request's body), `/ok` (200 with `ok`,
 * whatever the request's body), `/status/503`,
 * `/slow/2000` (answers after 2 s), `/random-delay/50` (0–50 ms), `/reset` (drops the connection),
 * `/flaky/<key>/<n>` (the first n calls naming that key answer `?status=` (503 by default), later
 * ones 200), `/switch/<key>` (answers the status the test set in `switches`, 200 when unset: an
 * origin a test takes down and brings back), `/quotes/<n>` (200 with n `"` characters: a body
 * that JSON escaping doubles), `/hold/<key>` (answers 200 only once the test calls `release(key)`:
 * a target that hangs; `holding(key)` counts the calls it holds now; `/hold/<key>/<status>` then
 * answers that status). `?retry-after=<value>` adds a `Retry-After` header
 * to any answer, `?webhook-delivery=<value>` a `webhook-delivery` header (a receiver's opt-out).
 * Every call is recorded in arrival order.
 */
export interface TargetCall {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  at: number;
}

export interface Target {
  url: string;
  calls: TargetCall[];
  /** Status of `/switch/<key>` by key (200 when unset). */
  switches: Map<string, number>;
  /** Calls of `/hold/<key>` held now. */
  holding(key: string): number;
  /** Answers the held calls of `/hold/<key>`, and every later one at once. */
  release(key: string): void;
  close(): Promise<void>;
}

/** `port` 0 (the default) takes a free one; the k6 scenarios serve it on a fixed port. */
export async function startTarget(listenPort = 0): Promise<Target> {
  const calls: TargetCall[] = [];
  const flakyCalls = new Map<string, number>();
  const switches = new Map<string, number>();
  const held = new Map<string, Set<() => void>>();
  const released = new Set<string>();
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const path = req.url ?? '/';
    calls.push({ method: req.method ?? 'GET', path, headers: req.headers, body, at: Date.now() });
    const url = new URL(path, 'http://target');
    const [, action, arg, failures] = url.pathname.split('/');
    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    if (action === 'reset') {
      req.socket.destroy();
      return;
    }
    if (action === 'slow') await wait(Number(arg ?? 1000));
    if (action === 'hold' && !released.has(arg ?? '')) {
      const waiting = held.get(arg ?? '') ?? new Set();
      held.set(arg ?? '', waiting);
      await new Promise<void>((resolve) => {
        waiting.add(resolve);
        res.on('close', () => waiting.delete(resolve)); // the caller gave up (its timeout)
      });
    }
    if (action === 'random-delay') await wait(Math.random() * Number(arg ?? 50));
    let status = action === 'status' ? Number(arg) : 200;
    if (action === 'switch') status = switches.get(arg ?? '') ?? 200;
    if (action === 'hold' && failures) status = Number(failures);
    if (action === 'flaky') {
      const seen = (flakyCalls.get(arg ?? '') ?? 0) + 1;
      flakyCalls.set(arg ?? '', seen);
      if (seen <= Number(failures ?? 1)) status = Number(url.searchParams.get('status') ?? 503);
    }
    const retryAfter = url.searchParams.get('retry-after');
    const delivery = url.searchParams.get('webhook-delivery');
    res
      .writeHead(status, {
        'content-type': 'text/plain',
        'x-target': 'test',
        ...(retryAfter === null ? {} : { 'retry-after': retryAfter }),
        ...(delivery === null ? {} : { 'webhook-delivery': delivery }),
      })
      .end(
        action === 'quotes' ? '"'.repeat(Number(arg)) : action === 'ok' ? 'ok' : body || `status ${status}`,
      );
  });
  await new Promise<void>((resolve) => server.listen(listenPort, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    switches,
    holding: (key) => held.get(key)?.size ?? 0,
    release: (key) => {
      released.add(key);
      for (const resume of held.get(key) ?? []) resume();
      held.delete(key);
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
