import { createPg } from '@requester/shared';
import { deleteWhenFileEnds, eventually, freePortRange, uniqueName } from '@requester/shared/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { requester } from './cli.fixture.ts';

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

  it(
    `${PROCESSES} processes, ${ROUNDS} rounds: all ready, all exit 0`,
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const name = uniqueName('race');
        const database = name.replaceAll('-', '_');
        databases.push(database);
        const adminPort = await freePortRange(PROCESSES);
        deleteWhenFileEnds(['in', 'out', 'dlq', 'events', 'in.bodies'].map((topic) => `${name}.${topic}`));
        const env = {
          DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${database}`,
          KAFKA_TOPIC_IN: `${name}.in`,
          KAFKA_TOPIC_OUT: `${name}.out`,
          KAFKA_TOPIC_DLQ: `${name}.dlq`,
          KAFKA_TOPIC_EVENTS: `${name}.events`,
          KAFKA_TOPIC_PARTITIONS: '2',
          REDIS_PREFIX: name,
          SHUTDOWN_TIMEOUT: '20s',
        };
        const printed: string[] = Array(PROCESSES).fill('');
        const runs = Array.from({ length: PROCESSES }, (_, i) => {
          const run = requester(
            ['--role', 'router,executor,relay', '--admin-port', String(adminPort + i)],
            env,
          );
          const keep = (data: Buffer) => {
            printed[i] = `${printed[i] ?? ''}${data}`;
          };
          run.child.stdout?.on('data', keep);
          run.child.stderr?.on('data', keep);
          return run;
        });
        const said = () =>
          runs
            .map(({ child }, i) => `process ${i} (exit ${child.exitCode}):\n${printed[i]?.slice(-3_000)}`)
            .join('\n');
        try {
          for (let i = 0; i < PROCESSES; i++)
            await eventually(
              () =>
                fetch(`http://127.0.0.1:${adminPort + i}/readyz`).then(
                  (res) => res.status === 200,
                  () => false,
                ),
              60_000,
              `round ${round}: process ${i} ready`,
              said,
            );
          for (const { child } of runs) child.kill('SIGTERM');
          const exits = await Promise.all(runs.map(({ exit }) => exit));
          expect(
            exits.map(({ code }) => code),
            said(),
          ).toEqual(Array(PROCESSES).fill(0));
        } finally {
          for (const { child } of runs) if (child.exitCode === null) child.kill('SIGKILL');
        }
      }
    },
    60_000 * ROUNDS,
  );
});
