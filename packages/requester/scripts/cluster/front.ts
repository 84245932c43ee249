import net from 'node:net';

/**
 * The local stand-in for a load balancer in front of several ingress + sync-gateway processes:
 * each TCP connection goes to the next backend in turn. A backend that refuses the connection (a
 * killed process) is skipped for that connection, so callers only see the failures a real
 * balancer would show: requests in flight on a process that dies.
 *
 * Run alone: `node front.ts <listen port> <backend port>,<backend port>...`
 */
export interface Front {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * `backendPorts` is read at each connection, so a caller may listen first (holding its port while
 * the backends start) and fill the array later; a connection before any backend is refused.
 */
export async function startFront(backendPorts: readonly number[], listenPort = 0): Promise<Front> {
  let next = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    client.pause();
    if (backendPorts.length === 0) {
      client.destroy();
      return;
    }
    const first = next++ % backendPorts.length;
    connect(first, 0);

    function connect(index: number, tried: number): void {
      const upstream = net.connect(backendPorts[index] as number, '127.0.0.1');
      let connected = false;
      upstream.once('connect', () => {
        connected = true;
        sockets.add(upstream);
        upstream.on('close', () => sockets.delete(upstream));
        client.pipe(upstream).pipe(client);
        client.resume();
        client.once('close', () => upstream.destroy());
        upstream.once('close', () => client.destroy());
      });
      upstream.on('error', () => {
        if (connected) return;
        if (tried + 1 < backendPorts.length) connect((index + 1) % backendPorts.length, tried + 1);
        else client.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(listenPort, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

if (import.meta.main) {
  const [listen, backends] = process.argv.slice(2);
  if (!listen || !backends) {
    console.error('usage: front.ts <listen port> <backend port>,<backend port>...');
    process.exit(2);
  }
  const front = await startFront(backends.split(',').map(Number), Number(listen));
  console.error(`front on ${front.url} → ${backends}`);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => void front.close().then(() => process.exit(0)));
  }
}
