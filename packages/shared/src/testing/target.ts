import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP target for tests, on 127.0.0.1 with a free port. Behaviour is chosen by the path, so
 * one server can play every part: `/echo` (200 with the request's body), `/status/503`,
 * `/slow/2000` (answers after 2 s), `/random-delay/50` (0–50 ms), `/reset` (drops the connection).
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
  close(): Promise<void>;
}

export async function startTarget(): Promise<Target> {
  const calls: TargetCall[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const path = req.url ?? '/';
    calls.push({ method: req.method ?? 'GET', path, headers: req.headers, body, at: Date.now() });
    const [, action, arg] = path.split('?')[0]?.split('/') ?? [];
    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    if (action === 'reset') {
      req.socket.destroy();
      return;
    }
    if (action === 'slow') await wait(Number(arg ?? 1000));
    if (action === 'random-delay') await wait(Math.random() * Number(arg ?? 50));
    const status = action === 'status' ? Number(arg) : 200;
    res
      .writeHead(status, { 'content-type': 'text/plain', 'x-target': 'test' })
      .end(body || `status ${status}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
