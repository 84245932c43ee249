import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for the partner, so that the example runs on one machine: it quotes a price per SKU
 * and records the orders it receives.
 */
export interface FakePartner {
  url: string;
  orders: unknown[];
  close(): Promise<void>;
}

export async function startFakePartner(port = 0, host = '127.0.0.1'): Promise<FakePartner> {
  const orders: unknown[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const quote = req.url?.match(/^\/quotes\/([^/?]+)/);
      if (req.method === 'GET' && quote) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ sku: decodeURIComponent(quote[1] ?? ''), price: 42 }));
      } else if (req.method === 'POST' && req.url === '/orders') {
        orders.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(201).end();
      } else {
        res.writeHead(404).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${bound}`,
    orders,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
