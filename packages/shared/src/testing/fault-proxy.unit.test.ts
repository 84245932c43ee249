import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from './fault-proxy.ts';

/** An echo server on loopback: what goes in comes back. */
async function echoServer(): Promise<{ address: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A connection through the proxy that collects what comes back, and how it ended. */
async function connect(proxy: FaultProxy) {
  const socket = net.connect(proxy.port, '127.0.0.1');
  let received = '';
  let ended: string | undefined;
  socket.on('data', (chunk) => {
    received += chunk;
  });
  socket.on('error', (err: NodeJS.ErrnoException) => {
    ended = err.code ?? 'error';
  });
  socket.on('close', () => {
    ended ??= 'closed';
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return {
    socket,
    received: () => received,
    ended: () => ended,
  };
}

const until = async (check: () => boolean, what: string) => {
  for (let i = 0; i < 500; i++) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`${what}: not within 5 s`);
};

describe('startFaultProxy', () => {
  const closing: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  async function proxied() {
    const echo = await echoServer();
    const proxy = await startFaultProxy(echo.address);
    closing.push(echo.close, proxy.close);
    return proxy;
  }

  it('passes bytes both ways, in order', async () => {
    const proxy = await proxied();
    const c = await connect(proxy);
    for (const part of ['a', 'b', 'c']) c.socket.write(part);
    await until(() => c.received() === 'abc', 'echo');
    expect(proxy.accepted).toBe(1);
  });

  it('stall: nothing passes while stalled, all of it in order once healed; the connection stays open', async () => {
    const proxy = await proxied();
    const c = await connect(proxy);
    proxy.stall();
    c.socket.write('one');
    c.socket.write('two');
    // A round trip through a second, unstalled path proves time passed for the stalled one.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect([c.received(), c.ended()]).toEqual(['', undefined]);
    proxy.heal();
    await until(() => c.received() === 'onetwo', 'echo after heal');
  });

  it('latency: a chunk arrives no sooner than the latency each way', async () => {
    const proxy = await proxied();
    const c = await connect(proxy);
    proxy.latency(100);
    const sent = performance.now();
    c.socket.write('x');
    await until(() => c.received() === 'x', 'echo');
    // Held once on the way in and once on the way out: a lower bound, never an upper one.
    expect(performance.now() - sent).toBeGreaterThanOrEqual(190);
  });

  it('partition: open connections are cut and new ones refused until healed', async () => {
    const proxy = await proxied();
    const c = await connect(proxy);
    proxy.partition();
    await until(() => c.ended() !== undefined, 'the open connection cut');
    const refused = await connect(proxy).then(
      async (d) => {
        await until(() => d.ended() !== undefined, 'the new connection cut');
        return d.received();
      },
      () => '',
    );
    expect(refused).toBe('');
    proxy.heal();
    const after = await connect(proxy);
    after.socket.write('back');
    await until(() => after.received() === 'back', 'echo after heal');
  });

  it('reset: open connections are cut once, new ones pass', async () => {
    const proxy = await proxied();
    const c = await connect(proxy);
    proxy.reset();
    await until(() => c.ended() !== undefined, 'the open connection cut');
    const after = await connect(proxy);
    after.socket.write('again');
    await until(() => after.received() === 'again', 'echo after reset');
  });
});
