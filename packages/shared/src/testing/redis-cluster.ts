import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const REDIS_SERVER = '/usr/bin/redis-server';
const REDIS_CLI = '/usr/bin/redis-cli';

export function redisServerAvailable(): boolean {
  return existsSync(REDIS_SERVER) && existsSync(REDIS_CLI);
}

export interface TestCluster {
  /** Seeds for createRedis({ url, cluster: true }). */
  url: string;
  stop(): Promise<void>;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Three free ports (and their cluster-bus ports, +10000) from `from` upwards. */
async function freePorts(from: number): Promise<number[]> {
  for (let base = from; base < from + 200; base += 3) {
    const ports = [base, base + 1, base + 2];
    const all = [...ports, ...ports.map((p) => p + 10000)];
    if ((await Promise.all(all.map(portFree))).every(Boolean)) return ports;
  }
  throw new Error(`no three free ports from ${from}`);
}

/**
 * Starts a throw-away 3-master Redis Cluster (no persistence) in a temp dir and waits until every
 * slot is served. `stop()` kills exactly the processes started here and removes the dir.
 */
export async function startRedisCluster(fromPort = 7101): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'rq-cluster-'));
  const ports = await freePorts(fromPort);
  const children: ChildProcess[] = ports.map((port) =>
    spawn(
      REDIS_SERVER,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        '2000',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
        '--protected-mode',
        'no',
      ],
      { stdio: 'ignore' },
    ),
  );
  const stop = async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await Promise.all(
      children.map((child) =>
        child.exitCode === null ? new Promise((resolve) => child.once('exit', resolve)) : undefined,
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) await waitFor(async () => (await cli(port, 'PING')) === 'PONG');
    await run(REDIS_CLI, [
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    for (const port of ports) {
      await waitFor(async () => (await cli(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'));
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: ports.map((p) => `redis://127.0.0.1:${p}`).join(','), stop };
}

async function cli(port: number, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(REDIS_CLI, ['-p', String(port), ...args]);
    return stdout.trim();
  } catch {
    return '';
  }
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('redis cluster did not come up in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
