import net from 'node:net';

// Fails the run early, with the fix spelled out, when the local infrastructure is not up.
// The tests themselves never start services: `./dev test` (and .ci/run) do, via infra/up.sh.
function listening(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 1500 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export default async function setup(): Promise<void> {
  const needed: Array<[string, string, number]> = [
    ['Kafka', '127.0.0.1', 9092],
    ['Redis', '127.0.0.1', 6379],
    ['PostgreSQL', '127.0.0.1', 5432],
  ];
  const down: string[] = [];
  for (const [name, host, port] of needed) {
    if (!(await listening(host, port))) down.push(`${name} (${host}:${port})`);
  }
  if (down.length > 0) {
    throw new Error(
      `not reachable: ${down.join(', ')}. Start the local infrastructure with: bash infra/up.sh`,
    );
  }
}
