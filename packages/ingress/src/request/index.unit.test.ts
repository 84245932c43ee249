import type { Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeRequest, requestHeader } from './index.ts';

/** Answers what requestHeader reads, next to what Hono's own `c.req.header` reads. */
const app = new Hono().get('/', (c) =>
  c.json({
    node: nodeRequest(c) !== undefined,
    ours: ['x-a', 'authorization', 'x-absent'].map((name) => requestHeader(c, name) ?? null),
    hono: ['x-a', 'authorization', 'x-absent'].map((name) => c.req.header(name) ?? null),
  }),
);

describe('requestHeader', () => {
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  let port = 0;
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** A raw HTTP/1.1 request (repeated fields as written); resolves with the JSON body answered. */
  function raw(head: string): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let text = '';
      const socket = connect(port, '127.0.0.1', () => socket.write(`${head}Connection: close\r\n\r\n`));
      socket.on('data', (chunk) => {
        text += chunk;
      });
      socket.on('error', reject);
      socket.on('end', () => resolve(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))));
    });
  }

  it("reads Node's request as the Web Headers would: any case, repeated fields joined, trimmed", async () => {
    const answer = await raw(
      'GET / HTTP/1.1\r\nHost: x\r\nX-A:  one \t\r\nx-a:two\r\nAuthorization: Bearer a\r\nAUTHORIZATION: Bearer b\r\n',
    );
    expect(answer).toEqual({
      node: true,
      ours: ['one, two', 'Bearer a, Bearer b', null],
      hono: ['one, two', 'Bearer a, Bearer b', null],
    });
  });

  it('reads the Web Request when there is no Node request (app.request)', async () => {
    const res = await app.request('/', { headers: { 'x-a': 'one', authorization: 'Bearer a' } });
    expect(await res.json()).toEqual({
      node: false,
      ours: ['one', 'Bearer a', null],
      hono: ['one', 'Bearer a', null],
    });
  });
});
