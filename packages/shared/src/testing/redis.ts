import { type ChildProcess, spawn } from 'node:child_process';
import { createRedis } from '../redis/index.ts';
import { freePort } from './index.ts';

export interface PrivateRedis {
  url: string;
  stop(): Promise<void>;
}

/**
 * A redis-server of its own (Debian's binary, no persistence, a free loopback port), for
 * benchmarks whose figures must not be disturbed by — or disturb — other users of the shared Redis.
 */
export async function startPrivateRedis(binary = '/usr/bin/redis-server'): Promise<PrivateRedis> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    binary,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  for (let i = 0; i < 100; i++) {
    const probe = createRedis({ url });
    probe.on('error', () => {});
    const up = await probe.ping().then(
      () => true,
      () => false,
    );
    probe.disconnect();
    if (up) return { url, stop };
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await stop();
  throw new Error(`${binary} did not start on port ${port}`);
}
