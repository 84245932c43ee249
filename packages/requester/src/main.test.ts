import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  eventually,
  freePort,
  freePortRange,
  TEST_DATABASE_URL,
  uniqueName,
} from '@requester/shared/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { requester } from '../test/cli.fixture.ts';

/** Whether the admin server on `port` answers /readyz with 200 (false while nothing listens). */
const isReady = (port: number | string) => () =>
  fetch(`http://127.0.0.1:${port}/readyz`).then(
    (res) => res.status === 200,
    () => false,
  );

describe('requester CLI', () => {
  const running: ChildProcess[] = [];
  afterEach(() => {
    for (const child of running) child.kill('SIGKILL');
  });

  it('explains itself with --help, exit codes included', async () => {
    const { code, stdout } = await requester(['--help']).exit;
    expect(code).toBe(0);
    expect(stdout).toMatch(/Exit codes: 0 done; 1 failed at run time/);
    expect(stdout).toMatch(/--role/);
    expect(stdout).toMatch(/ingress, sync-gateway, router, executor, relay/);
  });

  describe('loads only what parsing and help need', () => {
    // The libraries of the roles' clients and of the admin server: a command line that only
    // parses (--help, a usage error) must not load them; the command that runs imports its own.
    const HEAVY = /\/node_modules\/(kafkajs|ioredis|postgres|got|hono|@opentelemetry\/[^/]+)\//;
    const RECORDER = path.resolve(import.meta.dirname, '../test/loaded-modules.ts');

    /** The command line's exit, and the URLs of every module it loaded (test/loaded-modules.ts). */
    async function loading(
      args: string[],
    ): Promise<{ code: number | null; stdout: string; loaded: string[] }> {
      const file = path.join(mkdtempSync(path.join(tmpdir(), 'requester-modules-')), 'loaded.txt');
      const { code, stdout } = await requester(args, {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${RECORDER}`,
        LOADED_MODULES_FILE: file,
      }).exit;
      return { code, stdout, loaded: readFileSync(file, 'utf8').split('\n') };
    }

    it.each([
      [['--help'], 0],
      [['queue', '--help'], 0],
      [['queue', 'dead', 'list', '--help'], 0],
      [['dlq', '--help'], 0],
      [['migrate', '--help'], 0],
      [['--bogus'], 2],
      [['queue', 'bogus'], 2],
    ])('%j loads no client library', async (args, exitCode) => {
      const { code, loaded } = await loading(args);
      expect(code).toBe(exitCode);
      // The recorder saw the modules that are loaded (so the absence below is not its silence).
      expect(loaded.some((url) => url.includes('/node_modules/yargs/'))).toBe(true);
      expect(loaded.some((url) => url.endsWith('/src/ops/queue/cli.ts'))).toBe(true);
      expect(loaded.filter((url) => HEAVY.test(url))).toEqual([]);
      expect(loaded.filter((url) => url.endsWith('/run.ts') || url.endsWith('/runtime/index.ts'))).toEqual(
        [],
      );
    });

    it('a command that runs imports its implementation', async () => {
      const { code, stdout, loaded } = await loading(['config']);
      expect(code).toBe(0);
      expect(stdout).toContain('KAFKA_BROKERS');
      expect(loaded.some((url) => url.endsWith('/src/commands/run.ts'))).toBe(true);
    });
  });

  it('refuses an unknown role with a clear message and exit code 2', async () => {
    const { code, stderr } = await requester(['--role', 'bogus']).exit;
    expect(code).toBe(2);
    expect(stderr).toContain('unknown role "bogus"');
  });

  it('names the bad variable when the configuration is invalid', async () => {
    const { code, stderr } = await requester(['--role', 'relay'], {
      HTTP_PORT: 'abc',
      SHUTDOWN_TIMEOUT: '5x',
    }).exit;
    expect(code).toBe(2);
    expect(stderr).toContain('HTTP_PORT="abc"');
    expect(stderr).toContain('SHUTDOWN_TIMEOUT="5x"');
  });

  it('says which dependency does not answer, once, without a usage hint (exit 1)', async () => {
    const port = await freePort(); // nothing listens there
    const { code, stderr } = await requester(['queue', 'info'], { REDIS_URL: `redis://127.0.0.1:${port}` })
      .exit;
    expect(code).toBe(1);
    expect(stderr).toContain('requester: Redis does not answer: check REDIS_URL');
    expect(stderr).not.toContain('--help');
    expect(stderr).not.toContain('Unhandled error event');
    expect(stderr.match(/Redis connection lost/g)).toHaveLength(1);
  });

  it('prints the effective configuration without the Kafka SASL password either', async () => {
    const { code, stdout } = await requester(['config', '--effective'], {
      REDIS_URL: 'redis://:redis-pw-1@127.0.0.1:6379',
      DATABASE_URL: 'postgres://app:pg-pw-2@127.0.0.1:5432/x?sslmode=require',
      KAFKA_SASL_PASSWORD: 'kafka-pw-3',
    }).exit;
    expect(code).toBe(0);
    expect(stdout).toContain('redis://:[redacted]@127.0.0.1:6379');
    expect(stdout).toContain('postgres://app:[redacted]@127.0.0.1:5432/x?sslmode=require');
    expect(stdout).not.toMatch(/redis-pw-1|pg-pw-2|kafka-pw-3/);
  });

  it('prints the configuration table', async () => {
    const { code, stdout } = await requester(['config']).exit;
    expect(code).toBe(0);
    expect(stdout).toMatch(/\| `KAFKA_BROKERS` \| `127\.0\.0\.1:9092` \|/);
  });

  it('config --effective hides the password of every URL and every secret', async () => {
    const { code, stdout } = await requester(['config', '--effective', '--json'], {
      REDIS_URL: 'redis://:redis-pw-1@127.0.0.1:6379',
      DATABASE_URL: 'postgres://app:pg-pw-2@127.0.0.1:5432/requester',
      SIGNING_KEYS: 'k=text:signing-secret-3456789',
    }).exit;
    expect(code).toBe(0);
    const shown = JSON.parse(stdout) as Record<string, string>;
    expect(shown['REDIS_URL']).toBe('redis://:[redacted]@127.0.0.1:6379');
    expect(shown['DATABASE_URL']).toBe('postgres://app:[redacted]@127.0.0.1:5432/requester');
    expect(shown['SIGNING_KEYS']).toBe('[redacted]');
    for (const secret of ['redis-pw-1', 'pg-pw-2', 'signing-secret']) expect(stdout).not.toContain(secret);
  });

  it('becomes ready, then exits 0 on SIGTERM within the shutdown timeout', async () => {
    const name = uniqueName('cli');
    const adminPort = String(await freePortRange(1));
    const { child, exit } = requester(['--role', 'relay', '--admin-port', adminPort], {
      DATABASE_URL: TEST_DATABASE_URL,
      KAFKA_TOPIC_IN: `${name}.in`,
      KAFKA_TOPIC_OUT: `${name}.out`,
      KAFKA_TOPIC_DLQ: `${name}.dlq`,
      KAFKA_TOPIC_EVENTS: `${name}.events`,
      KAFKA_TOPIC_PARTITIONS: '1',
      SHUTDOWN_TIMEOUT: '20s',
    });
    running.push(child);
    await eventually(isReady(adminPort), 30_000, 'relay ready');
    const health = await fetch(`http://127.0.0.1:${adminPort}/healthz`);
    expect(health.status).toBe(200);
    const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
    expect(metrics).toContain('requester_relay_moved_total');

    const stoppedAt = Date.now();
    child.kill('SIGTERM');
    const { code, stdout } = await exit;
    expect(code).toBe(0);
    expect(Date.now() - stoppedAt).toBeLessThan(20_000);
    expect(stdout).toContain('shutting down: 3/3 close clients');
  }, 60_000);

  it('a role that fails to start says why and exits 1, even while /readyz is polled on a kept-alive connection', async () => {
    // A PostgreSQL that accepts connections and never answers: the relay's start fails after its
    // connect timeout, while this test keeps asking /readyz (as a load balancer would).
    const silent = net.createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const pgPort = (silent.address() as net.AddressInfo).port;
    const name = uniqueName('cli');
    const adminPort = await freePort();
    const { child, exit } = requester(['--role', 'relay', '--admin-port', String(adminPort)], {
      DATABASE_URL: `postgres://postgres@127.0.0.1:${pgPort}/${name.replaceAll('-', '_')}`,
      KAFKA_TOPIC_IN: `${name}.in`,
      KAFKA_TOPIC_OUT: `${name}.out`,
      KAFKA_TOPIC_DLQ: `${name}.dlq`,
      KAFKA_TOPIC_EVENTS: `${name}.events`,
      KAFKA_TOPIC_PARTITIONS: '1',
      SHUTDOWN_TIMEOUT: '60s',
    });
    running.push(child);
    let exited = false;
    const polled: number[] = [];
    const poll = (async () => {
      while (!exited) {
        const status = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
          (res) => res.status,
          () => 0,
        );
        polled.push(status);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    try {
      const { code, stdout, stderr } = await exit;
      exited = true;
      await poll;
      expect(polled, 'the admin server answered while the role started').toContain(503);
      expect(code).toBe(1);
      const failed = stdout
        .split('\n')
        .filter((line) => line.includes('"role relay failed to start'))
        .map((line) => JSON.parse(line) as { level: string; role: string });
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ level: 'error', role: 'relay' });
      expect(stderr).toContain('requester: ');
    } finally {
      exited = true;
      silent.close();
    }
  }, 60_000);

  it('refuses --processes for a role with an HTTP listener (exit 2)', async () => {
    const { code, stderr } = await requester(['--role', 'ingress,executor', '--processes', '2']).exit;
    expect(code).toBe(2);
    expect(stderr).toContain('--processes runs only router, executor, relay');
  });

  /** `requester --role executor --processes 2` on topics and a prefix of its own; the pids it logs. */
  async function supervisedExecutors() {
    const name = uniqueName('cli');
    const adminPort = await freePortRange(2);
    const { child, exit } = requester(
      ['--role', 'executor', '--processes', '2', '--admin-port', String(adminPort)],
      {
        KAFKA_TOPIC_IN: `${name}.in`,
        KAFKA_TOPIC_OUT: `${name}.out`,
        KAFKA_TOPIC_DLQ: `${name}.dlq`,
        KAFKA_TOPIC_EVENTS: `${name}.events`,
        KAFKA_TOPIC_PARTITIONS: '1',
        REDIS_PREFIX: name.slice(-24),
        SHUTDOWN_TIMEOUT: '20s',
      },
    );
    running.push(child);
    let out = '';
    child.stdout?.on('data', (d) => {
      out += d;
    });
    let err = '';
    child.stderr?.on('data', (d) => {
      err += d;
    });
    const childPids = () =>
      [...out.matchAll(/"childPid":(\d+)[^\n]*"process started"/g)].map((m) => Number(m[1]));
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const killAll = () => {
      for (const pid of childPids()) if (alive(pid)) process.kill(pid, 'SIGKILL');
    };
    // What a failed wait shows after its condition: the last lines the processes printed.
    const printed = () => {
      const all = err ? `${out}\n(stderr)\n${err}` : out;
      return `the processes printed:\n${all.split('\n').slice(-80).join('\n')}`;
    };
    return { child, exit, adminPort, output: () => out, printed, childPids, alive, killAll };
  }

  it('--processes 2: two ready executors; one killed is replaced; SIGTERM drains both, exit 0', async () => {
    const { child, exit, adminPort, output, printed, childPids, alive, killAll } =
      await supervisedExecutors();
    try {
      await eventually(isReady(adminPort), 30_000, 'child 0 ready', printed);
      await eventually(isReady(adminPort + 1), 30_000, 'child 1 ready', printed);
      // The supervisor's own record says which children run: each start is logged with its pid,
      // and a child that died before this point has been replaced by a newer one already.
      const started = childPids();
      const victim = started.at(-1) as number;
      process.kill(victim, 'SIGKILL');
      const victimDied = new RegExp(
        `"childPid":${victim},[^\\n]*"signal":"SIGKILL"[^\\n]*"process died unexpectedly: restarting it"`,
      );
      await eventually(() => victimDied.test(output()), 10_000, 'the supervisor saw the kill', printed);
      await eventually(() => childPids().length > started.length, 10_000, 'a new child started', printed);
      await eventually(isReady(adminPort), 30_000, 'child 0 ready', printed);
      await eventually(isReady(adminPort + 1), 30_000, 'child 1 ready', printed);

      // Only what follows the SIGTERM: a child that failed to start earlier (on a loaded box, a
      // dependency slow to answer) shut down too, and the supervisor replaced it, as it should.
      const beforeStop = output().length;
      child.kill('SIGTERM');
      const { code } = await exit;
      expect(code).toBe(0);
      const drained = output()
        .slice(beforeStop)
        .match(/shutting down: 3\/3 close clients/g);
      expect(drained, printed()).toHaveLength(2);
      for (const pid of childPids()) expect(alive(pid)).toBe(false);
    } finally {
      killAll();
    }
  }, 90_000);

  it('--processes 2: the children drain and stop when the parent is killed (-9)', async () => {
    const { child, adminPort, output, printed, childPids, alive, killAll } = await supervisedExecutors();
    try {
      await eventually(isReady(adminPort), 30_000, 'child 0 ready', printed);
      await eventually(isReady(adminPort + 1), 30_000, 'child 1 ready', printed);
      const beforeKill = output().length; // as above: only the drain the parent's death started
      child.kill('SIGKILL');
      await eventually(() => childPids().every((pid) => !alive(pid)), 30_000, 'every child gone', printed);
      const drained = output()
        .slice(beforeKill)
        .match(/shutting down: 3\/3 close clients/g);
      expect(drained, printed()).toHaveLength(2);
    } finally {
      killAll();
    }
  }, 90_000);
});
