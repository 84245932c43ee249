import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  type Config,
  createLogger,
  createPg,
  Dependencies,
  ensureDatabase,
  loadConfig,
  migrate,
} from '@requester/shared';
import { freePort, startRedisCluster } from '@requester/shared/testing';
import { type Front, startFront } from './front.ts';

/**
 * The local scale-out topology: every role in processes of its own, several of each, on a 3-master
 * Redis Cluster, the shared Kafka and PostgreSQL, and a round-robin front before the gateways.
 * `./dev cluster` starts it detached (it outlives the script; `./dev cluster down` stops it by the
 * pids in its run folder); the cluster tests and the scale-out benchmark start it attached.
 */
export type ClusterRole = 'gateway' | 'router' | 'executor' | 'relay';

/** A gateway is what a load balancer fronts: the HTTP API and the sync-gateway in one process. */
export const ROLE_FLAGS: Record<ClusterRole, string> = {
  gateway: 'ingress,sync-gateway',
  router: 'router',
  executor: 'executor',
  relay: 'relay',
};

export const DEFAULT_COUNTS: Record<ClusterRole, number> = { gateway: 2, router: 2, executor: 3, relay: 2 };

export interface TopologyOptions {
  /** Base of the topic names, the Redis prefix and the database name. */
  name: string;
  /** Where the pids file and one log per process are written. */
  runDir: string;
  counts?: Partial<Record<ClusterRole, number>>;
  /** Partitions of in, out and the DLQ (the router parallelism). */
  partitions?: number;
  /** Added to every process's environment (e.g. EXECUTOR_LEASE_TTL, AUTH). */
  env?: Record<string, string>;
  /** First port tried for the Redis Cluster nodes (their bus ports are +10000). */
  redisFromPort?: number;
  /**
   * Replicas per Redis master (default 0): `./dev cluster` runs one each, so that killing a master
   * shows a failover (docs/reliability.md, "Redis failover"); the tests run without, to spare the cores.
   */
  redisReplicas?: number;
  /** Port of the front (0: a free one). */
  frontPort?: number;
  /** Outlive this process (`./dev cluster`): the front runs as a process of its own too. */
  detached?: boolean;
  /** Bound on all processes answering /readyz. */
  readyTimeoutMs?: number;
}

export interface ClusterProcess {
  role: ClusterRole;
  /** e.g. `executor-2`; its log is `<runDir>/<name>.log`. */
  name: string;
  pid: number;
  adminUrl: string;
  /** Gateways only: their own HTTP API, behind the front. */
  httpUrl?: string;
  env: Record<string, string>;
  /** Resolves when the process exits (attached topologies only). */
  exited: Promise<void>;
}

export interface Topology {
  /** The environment common to every process (topics, Redis seeds, database). */
  env: Record<string, string>;
  config: Config;
  /** The round-robin front before the gateways. */
  frontUrl: string;
  gatewayUrls: string[];
  redisUrl: string;
  /** The redis-server processes of the Redis Cluster (for CPU accounting). */
  redisPids: number[];
  processes: ClusterProcess[];
  byRole(role: ClusterRole): ClusterProcess[];
  /** `kill -9` one process and wait for its exit. */
  kill(process: ClusterProcess): Promise<void>;
  /** SIGTERM one process (a graceful stop) and wait for its exit. */
  terminate(process: ClusterProcess): Promise<void>;
  /** Starts one more process of a role (e.g. to replace a killed one) and waits until it is ready. */
  add(role: ClusterRole): Promise<ClusterProcess>;
  /** SIGTERM to every process (SIGKILL after `graceMs`), then the Redis Cluster. */
  stop(graceMs?: number): Promise<void>;
}

const BIN = path.resolve(import.meta.dirname, '../../bin/requester');
const FRONT = path.resolve(import.meta.dirname, 'front.ts');
export const PIDS_FILE = 'pids';

export function topologyEnv(name: string, redisUrl: string, partitions: number): Record<string, string> {
  return {
    KAFKA_BROKERS: process.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
    KAFKA_TOPIC_IN: `${name}.in`,
    KAFKA_TOPIC_OUT: `${name}.out`,
    KAFKA_TOPIC_DLQ: `${name}.dlq`,
    KAFKA_TOPIC_EVENTS: `${name}.events`,
    KAFKA_TOPIC_PARTITIONS: String(partitions),
    REDIS_URL: redisUrl,
    REDIS_CLUSTER: 'true',
    REDIS_PREFIX: name,
    DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${name.replaceAll('-', '_')}`,
    ALLOW_PRIVATE_TARGETS: '127.0.0.1',
  };
}

export async function startTopology(options: TopologyOptions): Promise<Topology> {
  const counts = { ...DEFAULT_COUNTS, ...options.counts };
  mkdirSync(options.runDir, { recursive: true });
  const redis = await startRedisCluster(options.redisFromPort ?? 7501, {
    dir: path.join(options.runDir, 'redis'),
    detached: options.detached ?? false,
    replicas: options.redisReplicas ?? 0,
  });
  const env = { ...topologyEnv(options.name, redis.url, options.partitions ?? 12), ...options.env };
  const config = loadConfig(env);
  const processes: ClusterProcess[] = [];
  const pids: string[] = redis.nodes.map((n) => `redis-${n.port} ${n.pid}`);
  const children = new Map<ClusterProcess, ChildProcess>();
  const seq: Record<ClusterRole, number> = { gateway: 0, router: 0, executor: 0, relay: 0 };
  let front: Front | undefined;

  const savePids = () =>
    writeFileSync(
      path.join(options.runDir, PIDS_FILE),
      `${[...pids, ...processes.map((p) => `${p.name} ${p.pid}`)].join('\n')}\n`,
    );

  const spawnRole = async (role: ClusterRole): Promise<ClusterProcess> => {
    const name = `${role}-${++seq[role]}`;
    const adminPort = await freePort();
    const httpPort = role === 'gateway' ? await freePort() : undefined;
    const own: Record<string, string> = {
      ...env,
      KAFKA_CLIENT_ID: `${options.name}-${name}`,
      ADMIN_PORT: String(adminPort),
      ...(httpPort ? { HTTP_PORT: String(httpPort) } : {}),
    };
    const log = openSync(path.join(options.runDir, `${name}.log`), 'a');
    const child = spawn(BIN, ['--role', ROLE_FLAGS[role]], {
      env: { ...process.env, ...own },
      stdio: ['ignore', log, log],
      detached: options.detached ?? false,
    });
    closeSync(log);
    if (options.detached) child.unref();
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    const started: ClusterProcess = {
      role,
      name,
      pid: child.pid ?? 0,
      adminUrl: `http://127.0.0.1:${adminPort}`,
      ...(httpPort ? { httpUrl: `http://127.0.0.1:${httpPort}` } : {}),
      env: own,
      exited,
    };
    children.set(started, child);
    processes.push(started);
    savePids();
    return started;
  };

  const stopAll = async (graceMs = 15_000) => {
    await front?.close();
    const alive = [...children.entries()].filter(([, c]) => c.exitCode === null && c.signalCode === null);
    for (const [, child] of alive) child.kill('SIGTERM');
    const timer = setTimeout(() => {
      for (const [, child] of alive) if (child.exitCode === null) child.kill('SIGKILL');
    }, graceMs);
    await Promise.all(alive.map(([p]) => p.exited));
    clearTimeout(timer);
    await redis.stop();
  };

  // In process, the front listens before the processes start: a port chosen free long before it
  // is bound can be taken meanwhile (an outgoing connection's ephemeral port), and listen fails.
  const backends: number[] = [];
  try {
    if (!options.detached && counts.gateway > 0) front = await startFront(backends, options.frontPort ?? 0);
    await prepare(config);
    const spawned: ClusterProcess[] = [];
    for (const role of Object.keys(counts) as ClusterRole[]) {
      for (let i = 0; i < counts[role]; i++) spawned.push(await spawnRole(role));
    }
    await Promise.all(spawned.map((p) => ready(p, options.runDir, options.readyTimeoutMs)));
    const gatewayPorts = spawned.filter((p) => p.httpUrl).map((p) => Number(new URL(p.httpUrl ?? '').port));
    const frontPort = options.frontPort ?? 0;
    let frontUrl = '';
    if (gatewayPorts.length === 0) {
      // Nothing to front (a topology without gateways, e.g. the executor benchmark).
    } else if (options.detached) {
      const port = frontPort || (await freePort());
      const log = openSync(path.join(options.runDir, 'front.log'), 'a');
      const child = spawn(process.execPath, [FRONT, String(port), gatewayPorts.join(',')], {
        stdio: ['ignore', log, log],
        detached: true,
      });
      closeSync(log);
      child.unref();
      pids.push(`front ${child.pid}`);
      savePids();
      frontUrl = `http://127.0.0.1:${port}`;
    } else if (front) {
      backends.push(...gatewayPorts);
      frontUrl = front.url;
    }
    return {
      env,
      config,
      frontUrl,
      gatewayUrls: spawned.flatMap((p) => (p.httpUrl ? [p.httpUrl] : [])),
      redisUrl: redis.url,
      redisPids: redis.pids,
      processes,
      byRole: (role) => processes.filter((p) => p.role === role),
      async kill(target) {
        children.get(target)?.kill('SIGKILL');
        await target.exited;
      },
      async terminate(target) {
        children.get(target)?.kill('SIGTERM');
        await target.exited;
      },
      async add(role) {
        const added = await spawnRole(role);
        await ready(added, options.runDir, options.readyTimeoutMs);
        return added;
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll(2_000);
    throw err;
  }
}

/** Topics with the wanted partitions and a migrated database, once, before the processes race for them. */
async function prepare(config: Config): Promise<void> {
  const deps = new Dependencies({ ...config, createTopics: true }, createLogger({ level: 'warn' }));
  try {
    await deps.topics();
  } finally {
    await deps.close();
  }
  await ensureDatabase(config.databaseUrl);
  const sql = createPg({ url: config.databaseUrl, max: 1 });
  try {
    await migrate(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * Ready, or failed early: a process that exits while starting does not hold the caller 2 minutes,
 * and its error carries the end of its log (a test removes the run folder afterwards).
 */
function ready(process: ClusterProcess, runDir: string, timeoutMs = 120_000): Promise<void> {
  let done = false;
  const died = process.exited.then(() => {
    if (!done)
      throw new Error(
        `${process.name} exited while starting; its log ends:\n${logTail(runDir, process.name)}`,
      );
  });
  return Promise.race([waitReady(process, timeoutMs), died]).finally(() => {
    done = true;
  });
}

function logTail(runDir: string, name: string, lines = 30): string {
  try {
    return readFileSync(path.join(runDir, `${name}.log`), 'utf8')
      .trimEnd()
      .split('\n')
      .slice(-lines)
      .join('\n');
  } catch (err) {
    return `(no log: ${(err as Error).message})`;
  }
}

export async function waitReady(process: Pick<ClusterProcess, 'name' | 'adminUrl'>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await fetch(`${process.adminUrl}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${process.name} (${process.adminUrl}) not ready within ${timeoutMs} ms`);
}
