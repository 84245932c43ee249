import net from 'node:net';
import { sweepTestTopics } from '../packages/shared/src/testing/index.ts';

/** Test topics older than this are an earlier run's: no run of the suite (or of one file) lasts 3 h. */
const TEST_TOPICS_KEPT_MS = 3 * 3_600_000;

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
  // Each file deletes its own topics when it ends; what crashed runs and tests creating topics by
  // other means left on the shared broker goes here, once it is older than any run lasts.
  await sweepTestTopics(TEST_TOPICS_KEPT_MS).catch((err: unknown) => {
    process.stderr.write(`could not sweep old test topics: ${String(err)}\n`);
  });
}
