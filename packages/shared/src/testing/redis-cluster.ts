import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { eventually } from './server.ts';

const run = promisify(execFile);
export const REDIS_SERVER = '/usr/bin/redis-server';
const REDIS_CLI = '/usr/bin/redis-cli';

export function redisServerAvailable(): boolean {
  return existsSync(REDIS_SERVER) && existsSync(REDIS_CLI);
}

export interface TestCluster {
  /** Seeds for createRedis({ url, cluster: true }). */
  url: string;
  /** The redis-server processes, one per master. */
  pids: number[];
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /**
   * Where the nodes keep their cluster config and write their logs (kept on `stop`); default a
   * temporary folder removed on `stop`.
   */
  dir?: string;
  /**
   * Detached from this process (own process group, not waited for): the cluster outlives the
   * script that started it (`./dev cluster`); stop it by its `pids`.
   */
  detached?: boolean;
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
 * Starts a throw-away 3-master Redis Cluster (no persistence) and waits until every slot is
 * served. `stop()` kills exactly the processes started here (and removes a temporary dir).
 */
export async function startRedisCluster(
  fromPort = 7101,
  options: RedisClusterOptions = {},
): Promise<TestCluster> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'rq-cluster-'));
  mkdirSync(dir, { recursive: true });
  // Test files running in parallel may pick the same free ports at the same moment: the loser's
  // nodes fail to bind, and it tries the next ports rather than joining the winner's nodes.
  let base = fromPort;
  for (let attempt = 1; ; attempt++) {
    const ports = await freePorts(base);
    const nodes = ports.map((port) => spawnNode(port, dir, options));
    const stop = async () => {
      await killAll(nodes);
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
    };
    const ours = await Promise.all(nodes.map((node, i) => answersAs(node, ports[i] as number)));
    if (!ours.every(Boolean)) {
      await killAll(nodes);
      if (attempt >= 5) throw new Error(`no 3 ports from ${fromPort} where redis-server could listen`);
      base = (ports[2] as number) + 1;
      continue;
    }
    try {
      await run(REDIS_CLI, [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ]);
      for (const port of ports) {
        const ok = async () => (await cli(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok');
        await eventually(ok, 15_000, `redis cluster node ${port} ok`);
      }
    } catch (err) {
      await stop();
      throw err;
    }
    const pids = nodes.map((node) => node.pid ?? 0);
    return { url: ports.map((p) => `redis://127.0.0.1:${p}`).join(','), pids, stop };
  }
}

function spawnNode(port: number, dir: string, options: RedisClusterOptions): ChildProcess {
  const child = spawn(
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
      // No replicas, so no failover to speed up: a node a loaded test box starves for longer than
      // this is marked failed by its peers, and the whole cluster answers CLUSTERDOWN meanwhile.
      '--cluster-node-timeout',
      '30000',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'no',
      ...(options.dir ? ['--logfile', join(dir, `redis-${port}.log`)] : []),
    ],
    { stdio: 'ignore', detached: options.detached ?? false },
  );
  if (options.detached) child.unref();
  return child;
}

/** The node answers on its port — itself, not another test's node that won the port. */
async function answersAs(node: ChildProcess, port: number): Promise<boolean> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline && node.exitCode === null && node.signalCode === null) {
    const info = await cli(port, 'INFO', 'server');
    const pid = /process_id:(\d+)/.exec(info)?.[1];
    if (pid !== undefined) return Number(pid) === node.pid;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

async function killAll(nodes: ChildProcess[]): Promise<void> {
  const running = nodes.filter((node) => node.exitCode === null && node.signalCode === null);
  const exits = running.map((node) => new Promise((resolve) => node.once('exit', resolve)));
  for (const node of running) node.kill('SIGKILL');
  await Promise.all(exits);
}

async function cli(port: number, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(REDIS_CLI, ['-p', String(port), ...args]);
    return stdout.trim();
  } catch {
    return '';
  }
}
