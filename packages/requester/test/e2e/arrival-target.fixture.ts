/**
 * A target that only notes when each request arrives, in a process of its own (run by
 * `startArrivalTarget`): the instant a limit is counted at by a real target, its request event,
 * away from the event loop of the test and of any in-process executor, which would delay it.
 * It answers 200 at once (after `?delay=<ms>` when the path asks for one); `GET /arrivals` (not counted) answers the arrivals so far as JSON:
 * `[{ path, at }]`, `at` in epoch ms with a microsecond fraction.
 */
import { createServer } from 'node:http';

const arrivals: Array<{ path: string; at: number }> = [];
const server = createServer((req, res) => {
  const at = performance.timeOrigin + performance.now();
  if (req.url === '/arrivals') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(arrivals));
    return;
  }
  arrivals.push({ path: req.url ?? '/', at });
  req.resume();
  const delayMs = Number(new URL(req.url ?? '/', 'http://target').searchParams.get('delay') ?? 0);
  req.on('end', () =>
    setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'), delayMs),
  );
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
