import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, type PrivateServer } from './server.ts';

const run = promisify(execFile);
const KAFKA_SH = path.resolve(import.meta.dirname, '../../../../infra/kafka.sh');

export interface PrivateKafka extends PrivateServer {
  /** `127.0.0.1:<port>` */
  brokers: string;
  /** The SCRAM users of a broker started with `sasl` (the first one is the broker's own). */
  saslUsers?: SaslUser[];
  /** `infra/kafka.sh restart`: a graceful stop, then a start. */
  gracefulRestart(): Promise<void>;
}

export interface SaslUser {
  username: string;
  password: string;
}

export interface PrivateKafkaOptions {
  /**
   * A SASL_PLAINTEXT listener (SCRAM-SHA-256 and SCRAM-SHA-512) instead of PLAINTEXT, with these
   * users (added when the storage is formatted: `kafka-storage format --add-scram`).
   */
  sasl?: SaslUser[];
}

/**
 * A Kafka broker of its own, started by the project's `infra/kafka.sh` (same jars, same settings)
 * on free loopback ports with a throwaway data folder: for tests that stop or crash the broker
 * without disturbing the shared one. Takes ~10 s to start.
 */
export async function startPrivateKafka(options: PrivateKafkaOptions = {}): Promise<PrivateKafka> {
  const [port, controllerPort] = [await freePort(), await freePort()];
  const brokers = `127.0.0.1:${port}`;
  const runDir = await mkdtemp(path.join(tmpdir(), 'requester-kafka-'));
  const env = {
    ...process.env,
    KAFKA_BROKERS: brokers,
    KAFKA_CONTROLLER_PORT: String(controllerPort),
    REQUESTER_RUN_DIR: runDir,
    KAFKA_HEAP: '384m',
    // C1 only: the JVM starts much sooner on a busy box (docs/benchmarks/test-suite.md), and a
    // test's broker spends more of its life starting than serving; the shared broker is left as is.
    KAFKA_JVM_OPTS: '-XX:TieredStopAtLevel=1',
    ...(options.sasl
      ? { KAFKA_SASL_USERS: options.sasl.map((u) => `${u.username}:${u.password}`).join(',') }
      : {}),
  };
  const kafkaSh = (command: string) => run('bash', [KAFKA_SH, command], { env, timeout: 150_000 });
  // A start that fails (a timeout on a busy box) may leave the broker's JVM running on its own
  // (setsid): stop it, or it outlives the test run.
  await kafkaSh('start').catch(async (err: unknown) => {
    await kafkaSh('stop').catch(() => {});
    await rm(runDir, { recursive: true, force: true });
    throw err;
  });
  return {
    brokers,
    ...(options.sasl ? { saslUsers: options.sasl } : {}),
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
