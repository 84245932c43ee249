import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, type PrivateServer } from './index.ts';

const run = promisify(execFile);
const KAFKA_SH = path.resolve(import.meta.dirname, '../../../../infra/kafka.sh');

export interface PrivateKafka extends PrivateServer {
  /** `127.0.0.1:<port>` */
  brokers: string;
  /** `infra/kafka.sh restart`: a graceful stop, then a start. */
  gracefulRestart(): Promise<void>;
}

/**
 * A Kafka broker of its own, started by the project's `infra/kafka.sh` (same jars, same settings)
 * on free loopback ports with a throwaway data folder: for tests that stop or crash the broker
 * without disturbing the shared one. Takes ~10 s to start.
 */
export async function startPrivateKafka(): Promise<PrivateKafka> {
  const [port, controllerPort] = [await freePort(), await freePort()];
  const brokers = `127.0.0.1:${port}`;
  const runDir = await mkdtemp(path.join(tmpdir(), 'requester-kafka-'));
  const env = {
    ...process.env,
    KAFKA_BROKERS: brokers,
    KAFKA_CONTROLLER_PORT: String(controllerPort),
    REQUESTER_RUN_DIR: runDir,
    KAFKA_HEAP: '384m',
  };
  const kafkaSh = (command: string) => run('bash', [KAFKA_SH, command], { env, timeout: 150_000 });
  await kafkaSh('start');
  return {
    brokers,
    async stop() {
      await kafkaSh('stop').catch(() => {});
      await rm(runDir, { recursive: true, force: true });
    },
    async kill() {
      const pid = Number((await readFile(path.join(runDir, 'kafka', 'broker.pid'), 'utf8')).trim());
      process.kill(pid, 'SIGKILL');
      while (isAlive(pid)) await new Promise((resolve) => setTimeout(resolve, 50));
    },
    restart: () => kafkaSh('start').then(() => {}),
    gracefulRestart: () => kafkaSh('restart').then(() => {}),
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
