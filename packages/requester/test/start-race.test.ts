import net from 'node:net';
import { createPg } from '@requester/shared';
import { deleteWhenFileEnds, eventually, freePortRange, uniqueName } from '@requester/shared/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type Exit, requester } from './cli.fixture.ts';

/**
 * Processes started at once per round, and rounds, each on a fresh database, topics and prefix. The
 * suite runs 2 rounds (a round keeps both cores of the 2-core box busy for ~10 s, slowing every
 * file beside it); hunting the race takes more, as the fault tier's 10:
 * `START_RACE_ROUNDS=10 vitest run packages/requester/test/start-race.test.ts`, or `./dev test
 * --repeat N` on this file.
 */
const PROCESSES = 4;
const ROUNDS = Number(process.env.START_RACE_ROUNDS ?? 2);

/**
 * The "exits within seconds", made checkable: a generous bound on a loaded 2-core box, far
 * below the 30 s of silence it replaces; the time taken is what the test reports.
 */
const FAILED_START_EXIT_MS = 20_000;

/**
 * A rollout starts its pods together: topic creation, CREATE DATABASE, migrations and script loading
 * all race. Every process must become ready, and drain and exit 0 on SIGTERM.
 */
describe('processes started at once on fresh stores', () => {
  const databases: string[] = [];
  afterEach(async () => {
    const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
    for (const db of databases.splice(0)) await admin.unsafe(`drop database if exists "${db}" with (force)`);
    await admin.end({ timeout: 5 });
  });

  /** The environment of a fresh database, topics and Redis prefix, shared by a round's processes. */
  function freshStores(): Record<string, string> {
    const name = uniqueName('race');
    const database = name.replaceAll('-', '_');
    databases.push(database);
    deleteWhenFileEnds(['in', 'out', 'dlq', 'events', 'in.bodies'].map((topic) => `${name}.${topic}`));
    return {
      DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${database}`,
      KAFKA_TOPIC_IN: `${name}.in`,
      KAFKA_TOPIC_OUT: `${name}.out`,
      KAFKA_TOPIC_DLQ: `${name}.dlq`,
      KAFKA_TOPIC_EVENTS: `${name}.events`,
      KAFKA_TOPIC_PARTITIONS: '2',
      REDIS_PREFIX: name,
      SHUTDOWN_TIMEOUT: '20s',
    };
  }

  /** Starts one process per argument list at once; what each printed, for the failure messages. */
  function startAll(argLists: string[][], env: Record<string, string>) {
    const printed: string[] = argLists.map(() => '');
    const runs = argLists.map((args, i) => {
      const run = requester(args, env);
      const keep = (data: Buffer) => {
        printed[i] = `${printed[i] ?? ''}${data}`;
      };
      run.child.stdout?.on('data', keep);
      run.child.stderr?.on('data', keep);
      return run;
    });
    const said = () =>
      runs
        .map(
          ({ child }, i) =>
            `process ${i} (${argLists[i]?.join(' ')}, exit ${child.exitCode}):\n${printed[i]?.slice(-3_000)}`,
        )
        .join('\n');
    return { runs, said };
  }

  /** Each of `adminPorts` answers /readyz 200, then SIGTERM to each of `runs`: every exit code. */
  async function readyThenStopped(
    runs: { child: { kill: (signal: NodeJS.Signals) => boolean }; exit: Promise<Exit> }[],
    adminPorts: number[],
    said: () => string,
    what: string,
  ): Promise<(number | null)[]> {
    for (const [i, port] of adminPorts.entries())
      await eventually(
        () =>
          fetch(`http://127.0.0.1:${port}/readyz`).then(
            (res) => res.status === 200,
            () => false,
          ),
        60_000,
        `${what}: process ${i} ready`,
        said,
      );
    for (const { child } of runs) child.kill('SIGTERM');
    return (await Promise.all(runs.map(({ exit }) => exit))).map(({ code }) => code);
  }

  it(
    `${PROCESSES} processes, ${ROUNDS} rounds: all ready, all exit 0`,
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const env = freshStores();
        const adminPort = await freePortRange(PROCESSES);
        const { runs, said } = startAll(
          Array.from({ length: PROCESSES }, (_, i) => [
            '--role',
            'router,executor,relay',
            '--admin-port',
            String(adminPort + i),
          ]),
          env,
        );
        try {
          const ports = runs.map((_, i) => adminPort + i);
          const codes = await readyThenStopped(runs, ports, said, `round ${round}`);
          expect(codes, said()).toEqual(Array(PROCESSES).fill(0));
        } finally {
          for (const { child } of runs) if (child.exitCode === null) child.kill('SIGKILL');
        }
      }
    },
    60_000 * ROUNDS,
  );

  it('different roles at once: all ready and exit 0; one that cannot start says why and exits 1 within seconds', async () => {
    const env = freshStores();
    const ports = await freePortRange(6);
    const admin = (i: number) => ['--admin-port', String(ports + i)];
    // The failing one's HTTP port is held by this test: its ingress cannot listen, whatever the race.
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const takenPort = (taken.address() as net.AddressInfo).port;
    const roles = [
      ['--role', 'ingress,router', '--http-port', String(ports + 4), ...admin(0)],
      ['--role', 'executor', ...admin(1)],
      ['--role', 'relay', ...admin(2)],
      ['--role', 'all', '--http-port', String(ports + 5), ...admin(3)],
    ];
    const startedAt = Date.now();
    const { runs, said } = startAll([...roles, ['--role', 'ingress', '--http-port', String(takenPort)]], env);
    const failed = runs[roles.length]?.exit.then((exit) => ({ ...exit, exitedAt: Date.now() }));
    try {
      const codes = await readyThenStopped(
        runs.slice(0, roles.length),
        roles.map((_, i) => ports + i),
        said,
        'mixed roles',
      );
      expect(codes, said()).toEqual(Array(roles.length).fill(0));
      const { code, stdout, exitedAt } = (await failed) as Exit & { exitedAt: number };
      expect(code, said()).toBe(1);
      const cause = stdout
        .split('\n')
        .filter((line) => line.includes('"role ingress failed to start'))
        .map((line) => JSON.parse(line) as { time: string; role: string; msg: string });
      expect(cause, stdout).toHaveLength(1);
      expect(cause[0]?.msg).toContain('EADDRINUSE');
      // From the failure to the exit: the part the process controls (its start before it, slow
      // on a loaded box, is the same as the others').
      const exitMs = exitedAt - Date.parse(cause[0]?.time ?? '');
      expect(exitMs, said()).toBeLessThan(FAILED_START_EXIT_MS);
      console.info(
        `start-race: the ingress that could not listen exited ${code} ${exitMs} ms after it logged why (${exitedAt - startedAt} ms after the start)`,
      );
    } finally {
      for (const { child } of runs) if (child.exitCode === null) child.kill('SIGKILL');
      taken.close();
    }
  }, 90_000);
});
