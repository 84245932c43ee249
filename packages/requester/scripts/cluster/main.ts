import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { KeyStore } from '@requester/ingress';
import { createLogger, Dependencies, loadConfig } from '@requester/shared';
import { PIDS_FILE, startTopology } from './topology.ts';

/**
 * `./dev cluster [up]` starts the local scale-out topology detached (2 gateways behind one port,
 * 2 routers, 3 executors, 2 relays, a 3-master Redis Cluster with a replica per master; `in` with
 * 12 partitions) and
 * returns once every process is ready; `./dev cluster down` stops exactly the processes it
 * started, by the pids it wrote in `.run/cluster/pids`.
 */
const ROOT = path.resolve(import.meta.dirname, '../../../..');
const RUN_DIR = path.join(ROOT, '.run', 'cluster');
const PIDS = path.join(RUN_DIR, PIDS_FILE);
const NAME = process.env.CLUSTER_NAME ?? 'requester-cluster';

function recordedPids(): Array<{ name: string; pid: number }> {
  if (!existsSync(PIDS)) return [];
  return readFileSync(PIDS, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [name = '', pid = '0'] = line.split(' ');
      return { name, pid: Number(pid) };
    });
}

/**
 * Running, and still the process we started: a pid recorded long ago may belong to something else
 * by now, which `down` must never signal.
 */
function alive(p: { name: string; pid: number }): boolean {
  const expected = p.name.startsWith('redis') ? 'redis-server' : p.name === 'front' ? 'front.ts' : 'main.ts';
  try {
    return readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').includes(expected);
  } catch {
    return false;
  }
}

async function up(): Promise<void> {
  const running = recordedPids().filter(alive);
  if (running.length) {
    console.error(`the cluster is already running (${running.length} processes); ./dev cluster down first`);
    process.exit(1);
  }
  // Cluster nodes refuse to form a new cluster from the config files of the last one.
  rmSync(path.join(RUN_DIR, 'redis'), { recursive: true, force: true });
  const frontPort = Number(process.env.HTTP_PORT ?? 8180);
  console.error(`starting the cluster topology "${NAME}" (logs in ${path.relative(ROOT, RUN_DIR)}/)…`);
  const topology = await startTopology({
    name: NAME,
    runDir: RUN_DIR,
    detached: true,
    frontPort,
    redisFromPort: Number(process.env.CLUSTER_REDIS_PORT ?? 7601),
    redisReplicas: 1,
    env: {
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
      ...(process.env.AUTH ? { AUTH: process.env.AUTH } : {}),
    },
  });
  const apiKey = topology.env.AUTH === 'off' ? undefined : await createLocalKey(topology.env);
  const envFile = path.join(RUN_DIR, 'env');
  writeFileSync(
    envFile,
    Object.entries(topology.env)
      .map(([k, v]) => `export ${k}=${v}`)
      .join('\n')
      .concat('\n'),
  );
  const lines = topology.processes.map(
    (p) =>
      `  ${p.name.padEnd(11)} pid ${String(p.pid).padEnd(8)} admin ${p.adminUrl}${p.httpUrl ? `  http ${p.httpUrl}` : ''}`,
  );
  console.error(`
  The cluster is ready: ${topology.frontUrl} (round-robin over ${topology.gatewayUrls.length} gateways)

${lines.join('\n')}
  Redis Cluster  ${topology.redisUrl}
  topics         ${topology.env.KAFKA_TOPIC_IN} (${topology.env.KAFKA_TOPIC_PARTITIONS} partitions), ${topology.env.KAFKA_TOPIC_OUT}

    curl -s -X POST ${topology.frontUrl}/request -H 'content-type: application/json'${apiKey ? ` -H 'authorization: Bearer ${apiKey}'` : ''} \\
      -d '{"request":{"uri":"","body":"hello"},"meta":{"requestId":"c-1","sync":true}}'
${apiKey ? `  (the key is kept in ${path.relative(ROOT, path.join(RUN_DIR, 'api-key'))}; AUTH=off ./dev cluster runs without keys)\n` : ''}
  Admin commands on it: (. ${path.relative(ROOT, envFile)} && packages/requester/bin/requester queue info)
  Stop it: ./dev cluster down
`);
  process.exit(0);
}

/** A key of the topology's database for the printed curl (API keys are required by default). */
async function createLocalKey(env: Record<string, string>): Promise<string> {
  const deps = new Dependencies(loadConfig(env), createLogger({ level: 'warn' }));
  try {
    const store = new KeyStore(await deps.sql());
    const { token } = await store.create({
      name: `cluster-${Date.now().toString(36)}`,
      sync: true,
      schedule: true,
    });
    writeFileSync(path.join(RUN_DIR, 'api-key'), `${token}\n`, { mode: 0o600 });
    return token;
  } finally {
    await deps.close();
  }
}

async function down(): Promise<void> {
  const recorded = recordedPids();
  const running = recorded.filter(alive);
  for (const p of running) process.kill(p.pid, 'SIGTERM');
  const deadline = Date.now() + 40_000;
  while (running.some(alive) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const p of running.filter(alive)) {
    console.error(`${p.name} (pid ${p.pid}) did not stop in time: SIGKILL`);
    process.kill(p.pid, 'SIGKILL');
  }
  rmSync(PIDS, { force: true });
  console.error(running.length ? `stopped ${running.length} processes` : 'the cluster was not running');
}

function status(): void {
  if (recordedPids().length === 0) console.error('the cluster is not running');
  for (const p of recordedPids()) console.log(`${p.name.padEnd(11)} ${p.pid} ${alive(p) ? 'up' : 'down'}`);
}

const command = process.argv[2] ?? 'up';
if (command === 'up') await up();
else if (command === 'down') await down();
else if (command === 'status') status();
else {
  console.error(`unknown cluster command '${command}'; try up, down or status`);
  process.exit(2);
}
