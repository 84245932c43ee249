import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { ByteBudget, readJsonBody } from './index.ts';

function streamed(chunks: string[], onPull?: () => void): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let i = 0;
  return new ReadableStream(
    {
      pull(controller) {
        onPull?.();
        const chunk = chunks[i++];
        if (chunk === undefined) controller.close();
        else controller.enqueue(encoder.encode(chunk));
      },
    },
    { highWaterMark: 0 },
  ); // pull only on demand, so `pulled` counts what was actually read
}

function post(
  body: string | Uint8Array | ReadableStream<Uint8Array> | null,
  headers: Record<string, string> = {},
): Request {
  return new Request('http://x/request', { method: 'POST', body, headers, duplex: 'half' } as RequestInit);
}

describe('readJsonBody', () => {
  it('parses a JSON body within the bound', async () => {
    await expect(readJsonBody(post('{"a":1}'), 7)).resolves.toEqual({ ok: true, value: { a: 1 }, bytes: 7 });
  });

  it('refuses a declared Content-Length above the bound without reading', async () => {
    let pulled = 0;
    const request = post(
      streamed(['{}'], () => pulled++),
      { 'content-length': '100' },
    );
    const read = await readJsonBody(request, 10);
    expect(read).toMatchObject({ ok: false, status: 413 });
    expect(pulled).toBe(0);
  });

  it('cuts a chunked body off as soon as it passes the bound, leaving the rest unread', async () => {
    let pulled = 0;
    const chunks = Array.from({ length: 100 }, () => 'x'.repeat(10));
    const read = await readJsonBody(post(streamed(chunks, () => pulled++)), 25);
    expect(read).toMatchObject({ ok: false, status: 413 });
    expect(pulled).toBeLessThan(10);
  });

  it('answers 400 for malformed JSON, an empty body and invalid UTF-8', async () => {
    expect(await readJsonBody(post('{"a":'), 100)).toMatchObject({
      ok: false,
      status: 400,
      message: /malformed JSON/,
    });
    expect(await readJsonBody(post(''), 100)).toMatchObject({ ok: false, status: 400, message: /empty/ });
    expect(await readJsonBody(post(new Uint8Array([0x22, 0xff, 0x22])), 100)).toMatchObject({
      ok: false,
      status: 400,
      message: /UTF-8/,
    });
  });

  it('bounds the bytes of all bodies in flight: a body that finds the budget spent is cut off (503)', async () => {
    const budget = new ByteBudget(100);
    const held = await readJsonBody(post(`"${'x'.repeat(58)}"`), 1_000, budget);
    expect(held).toMatchObject({ ok: true, bytes: 60 });
    expect(budget.inUse()).toBe(60); // kept until the caller is done with the request

    let pulled = 0;
    const chunks = Array.from({ length: 10 }, () => 'x'.repeat(10));
    const cut = await readJsonBody(post(streamed(chunks, () => pulled++)), 1_000, budget);
    expect(cut).toMatchObject({ ok: false, status: 503 });
    expect(pulled).toBeLessThan(10); // the rest was never read
    expect(budget.inUse()).toBe(60); // what the cut body had taken went back

    expect(await readJsonBody(post('{"a":'), 1_000, budget)).toMatchObject({ status: 400 });
    expect(budget.inUse()).toBe(60); // a refused body gives its bytes back
    budget.give(60);
    expect(budget.inUse()).toBe(0);
  });

  it('gives the bytes back when the client goes away mid-body', async () => {
    const budget = new ByteBudget(100);
    const encoder = new TextEncoder();
    let sent = 0;
    const broken = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (sent++ < 3) controller.enqueue(encoder.encode('x'.repeat(10)));
          else controller.error(new Error('socket hang up'));
        },
      },
      { highWaterMark: 0 },
    );
    await expect(readJsonBody(post(broken), 1_000, budget)).rejects.toThrow('socket hang up');
    expect(budget.inUse()).toBe(0);
  });
});

/**
 * The same reader on Node's own request (what the server hands it): a real HTTP server whose
 * handler reads the body and answers with what it got, and a client that writes in pieces.
 */
describe('readJsonBody on a Node request', () => {
  const budget = new ByteBudget(1_000);
  let received: Array<Awaited<ReturnType<typeof readJsonBody>> | Error> = [];
  const server = createServer(async (req, res) => {
    let read: Awaited<ReturnType<typeof readJsonBody>>;
    try {
      read = await readJsonBody(req, 100, budget);
    } catch (err) {
      received.push(err as Error);
      return;
    }
    received.push(read);
    if (read.ok) budget.give(read.bytes);
    res.writeHead(read.ok ? 200 : read.status).end(JSON.stringify(read));
  });
  let port = 0;

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => {
    received = [];
  });

  /**
   * POSTs `pieces` (chunked unless `length` is declared) on a connection of its own (what a cut
   * body leaves unread stays on its connection); resolves with the status answered.
   */
  function send(pieces: string[], length?: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ port, host: '127.0.0.1', method: 'POST', path: '/', agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      if (length !== undefined) req.setHeader('content-length', length);
      for (const piece of pieces) req.write(piece);
      req.end();
    });
  }

  it('parses a body sent in pieces', async () => {
    expect(await send(['{"a":', '[1,2', ']}'])).toBe(200);
    expect(received).toEqual([{ ok: true, value: { a: [1, 2] }, bytes: 11 }]);
    expect(budget.inUse()).toBe(0);
  });

  it('answers 413 to a chunked body past the bound without waiting for its end, and to a declared one', async () => {
    const pieces = Array.from({ length: 100 }, () => 'x'.repeat(1_000));
    expect(await send(pieces)).toBe(413);
    expect(await send(['{}'], 101)).toBe(413);
    expect(received).toMatchObject([
      { ok: false, status: 413 },
      { ok: false, status: 413 },
    ]);
    expect(budget.inUse()).toBe(0);
  });

  it('answers 503 when the bodies in flight hold the budget, and gives back what it took', async () => {
    budget.take(950);
    expect(await send(['{"a":', '"', 'x'.repeat(60), '"}'])).toBe(503);
    expect(budget.inUse()).toBe(950);
    budget.give(950);
  });

  it('gives the bytes back when the client goes away mid-body', async () => {
    const req = httpRequest({ port, host: '127.0.0.1', method: 'POST', path: '/', agent: false });
    req.on('error', () => {});
    req.write('{"a":"xxxxxxxxxx');
    await vi.waitFor(() => expect(budget.inUse()).toBeGreaterThan(0));
    req.destroy();
    await vi.waitFor(() => expect(received).toHaveLength(1));
    expect(received[0]).toBeInstanceOf(Error);
    expect(budget.inUse()).toBe(0);
  });
});
