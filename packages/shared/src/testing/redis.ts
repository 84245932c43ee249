import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createRedis } from '../redis/index.ts';
import { freePort, type PrivateServer } from './server.ts';

/** `stop` is SIGTERM; a server without persistence comes back empty from `restart`. */
export interface PrivateRedis extends PrivateServer {
  /** With the credentials when the server requires them (`redis://[user]:password@…`). */
  url: string;
}

export interface PrivateRedisOptions {
  binary?: string;
  /**
   * Append-only file with fsync every second, in a temporary folder: what Requester needs of a
   * production Redis (a crash of the process keeps every write it acknowledged). Default: no
   * persistence (benchmarks).
   */
  persistent?: boolean;
  /**
   * Require a password: alone, it is the default user's (`requirepass`); with `user`, that ACL
   * user gets every right and the default user is disabled.
   */
  password?: string;
  user?: string;
}

/**
 * A redis-server of its own (Debian's binary, a free loopback port), for benchmarks whose figures
 * must not be disturbed by — or disturb — other users of the shared Redis, and for tests that
 * crash and restart Redis.
 */
export async function startPrivateRedis(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const binary = options.binary ?? '/usr/bin/redis-server';
  const port = await freePort();
  const { password, user } = options;
  const credentials = password ? `${encodeURIComponent(user ?? '')}:${encodeURIComponent(password)}@` : '';
  const url = `redis://${credentials}127.0.0.1:${port}`;
  const dir = options.persistent ? await mkdtemp(path.join(tmpdir(), 'requester-redis-')) : undefined;
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', ''];
  args.push(
    ...(dir ? ['--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no']),
  );
  if (password && user)
    args.push('--user', user, 'on', `>${password}`, '~*', '&*', '+@all', '--user', 'default', 'off');
  else if (password) args.push('--requirepass', password);
  let child: ChildProcess | undefined;

  const halt = async (signal: NodeJS.Signals) => {
    const running = child;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill(signal);
    await exited;
  };
  const start = async () => {
    child = spawn(binary, args, { stdio: 'ignore' });
    if (await answers(url)) return;
    await halt('SIGKILL');
    throw new Error(`${binary} did not start on port ${port}`);
  };
  await start();
  return {
    url,
    async stop() {
      await halt('SIGTERM');
      if (dir) await rm(dir, { recursive: true, force: true });
    },
    kill: () => halt('SIGKILL'),
    restart: start,
  };
}

/** Pings until the server answers (≤ 5 s; loading an append-only file may take a moment). */
async function answers(url: string): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    const probe = createRedis({ url });
    probe.on('error', () => {});
    const up = await probe.ping().then(
      () => true,
      () => false,
    );
    probe.disconnect();
    if (up) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

/**
 * Drops the subscriber connection named `connectionName` (a duplicate keeps its client's name) once
 * it has subscribed, as a network blip would: what tests of pub/sub announcements need to see a
 * loss counted. `redis`: another connection to the same server.
 */
export async function killSubscriber(
  redis: {
    client(subcommand: 'LIST'): Promise<unknown>;
    client(subcommand: 'KILL', ...args: string[]): Promise<unknown>;
  },
  connectionName: string,
): Promise<void> {
  let id: string | undefined;
  while (id === undefined) {
    const list = String(await redis.client('LIST'));
    const line = list.split('\n').find((l) => l.includes(`name=${connectionName} `) && l.includes(' sub=1 '));
    id = line?.match(/^id=(\d+)/)?.[1];
    if (id === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await redis.client('KILL', 'ID', id);
}
