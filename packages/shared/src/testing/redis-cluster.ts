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
  /** Seeds for createRedis({ url, cluster: true }): every node, so that a client finds the cluster with a master down. */
  url: string;
  /** The redis-server processes: the masters first, then their replicas. */
  pids: number[];
  /** Every node as created: port, process and the role it was given (a failover changes roles, see `clusterRoles`). */
  nodes: ClusterNode[];
  /**
   * Starts the node of `port` again (after a `kill -9`) on its cluster config, empty (no
   * persistence): once its slots have a new master, it rejoins as that master's replica. Resolves
   * when it answers; its `pid` in `nodes` is the new one.
   */
  restart(port: number): Promise<void>;
  stop(): Promise<void>;
}

export interface ClusterNode {
  port: number;
  pid: number;
  /** The role `redis-cli --cluster create` gave it. */
  role: 'master' | 'replica';
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
  /** Replicas per master (`--cluster-replicas`); default 0. */
  replicas?: number;
  /**
   * `cluster-node-timeout`: how long a node may not answer before its peers mark it failed, and
   * with replicas, promote one of its replicas. Default 30 s without replicas (there is no failover
   * to speed up: a node a loaded test box starves for longer is marked failed, and the whole
   * cluster answers CLUSTERDOWN meanwhile), 5 s with replicas (a failover within seconds; a node
   * starved for longer is replaced, which costs what a failover costs, see docs/reliability.md).
   */
  nodeTimeoutMs?: number;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** `count` consecutive free ports (and their cluster-bus ports, +10000) from `from` upwards. */
async function freePorts(from: number, count: number): Promise<number[]> {
  for (let base = from; base < from + 200; base += count) {
    const ports = Array.from({ length: count }, (_, i) => base + i);
    const all = [...ports, ...ports.map((p) => p + 10000)];
    if ((await Promise.all(all.map(portFree))).every(Boolean)) return ports;
  }
  throw new Error(`no ${count} free ports from ${from}`);
}

/**
 * Starts a throw-away 3-master Redis Cluster (no persistence), with `replicas` replicas per master,
 * and waits until every slot is served and every replica is in sync. `stop()` kills exactly the
 * processes started here (and removes a temporary dir).
 */
export async function startRedisCluster(
  fromPort = 7101,
  options: RedisClusterOptions = {},
): Promise<TestCluster> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'rq-cluster-'));
  mkdirSync(dir, { recursive: true });
  // Test files running in parallel may pick the same free ports at the same moment: the loser's
  // nodes fail to bind, and it tries the next ports rather than joining the winner's nodes.
  const replicas = options.replicas ?? 0;
  const count = 3 * (1 + replicas);
  const nodeTimeoutMs = options.nodeTimeoutMs ?? (replicas > 0 ? 5_000 : 30_000);
  let base = fromPort;
  for (let attempt = 1; ; attempt++) {
    const ports = await freePorts(base, count);
    const nodes = ports.map((port) => spawnNode(port, dir, nodeTimeoutMs, options));
    const stop = async () => {
      await killAll(nodes);
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
    };
    const ours = await Promise.all(nodes.map((node, i) => answersAs(node, ports[i] as number)));
    if (!ours.every(Boolean)) {
      await killAll(nodes);
      if (attempt >= 5) throw new Error(`no ${count} ports from ${fromPort} where redis-server could listen`);
      base = (ports[count - 1] as number) + 1;
      continue;
    }
    try {
      await run(REDIS_CLI, [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ]);
      for (const port of ports) {
        const ok = async () => (await cli(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok');
        await eventually(ok, 15_000, `redis cluster node ${port} ok`);
      }
      const roles = await clusterRoles(ports[0] as number);
      for (const port of ports.filter((p) => roles.get(p) === 'replica')) {
        const synced = async () => (await cli(port, 'INFO', 'replication')).includes('master_link_status:up');
        await eventually(synced, 30_000, `redis cluster replica ${port} in sync`);
      }
      const created: ClusterNode[] = ports.map((port, i) => ({
        port,
        pid: nodes[i]?.pid ?? 0,
        role: roles.get(port) ?? ('master' as const),
      }));
      created.sort((a, b) => (a.role === b.role ? a.port - b.port : a.role === 'master' ? -1 : 1));
      const restart = async (port: number) => {
        const at = ports.indexOf(port);
        const node = created.find((n) => n.port === port);
        if (at < 0 || !node) throw new Error(`no node ${port} in this cluster`);
        const child = spawnNode(port, dir, nodeTimeoutMs, options);
        nodes[at] = child;
        if (!(await answersAs(child, port)))
          throw new Error(`redis cluster node ${port} did not start again`);
        node.pid = child.pid ?? 0;
      };
      return {
        url: created.map((n) => `redis://127.0.0.1:${n.port}`).join(','),
        pids: created.map((n) => n.pid),
        nodes: created,
        restart,
        stop,
      };
    } catch (err) {
      await stop();
      throw err;
    }
  }
}

/**
 * Each node's role as the node at `port` sees it now (CLUSTER NODES): after a failover, the
 * promoted replica is a master, and a failed master is left out (it serves nothing).
 */
export async function clusterRoles(port: number): Promise<Map<number, 'master' | 'replica'>> {
  const roles = new Map<number, 'master' | 'replica'>();
  for (const line of (await cli(port, 'CLUSTER', 'NODES')).split('\n')) {
    const [, address, flags] = line.split(' ');
    const nodePort = Number(/:(\d+)@/.exec(address ?? '')?.[1]);
    if (!nodePort || !flags || flags.includes('fail')) continue;
    roles.set(nodePort, flags.includes('master') ? 'master' : 'replica');
  }
  return roles;
}

function spawnNode(
  port: number,
  dir: string,
  nodeTimeoutMs: number,
  options: RedisClusterOptions,
): ChildProcess {
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
      '--cluster-node-timeout',
      String(nodeTimeoutMs),
      // A replica that joins (or rejoins after a restart) is synced at once, not after 5 s.
      '--repl-diskless-sync-delay',
      '0',
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
