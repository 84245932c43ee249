import type { KafkaProducer } from '@requester/shared/kafka';
import { Outbox, type OutboxRow } from '@requester/shared/outbox';
import { createPg, ensureDatabase, migrate, type Sql } from '@requester/shared/pg';
import {
  createTestTopics,
  eventually,
  readTopic,
  silentLogger,
  startPrivatePostgres,
  TEST_DATABASE_URL,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Relay } from './index.ts';

/**
 * Two relay processes over one outbox take turns to claim and produce, as one process's workers
 * do (Outbox.takeTurn): an ordered partition's rows claimed by two relays reach `in` in claim
 * order. Each relay here has a PostgreSQL pool of its own (its own sessions, as two processes
 * would); the first one's produce is held back by the test until the second one either produced
 * or waits for the turn.
 */
describe('relay: two relay processes keep an ordered partition in order', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  let otherSql: Sql;
  let producer: KafkaProducer;
  let relays: Relay[] = [];
  const releases: Array<() => void> = [];

  beforeAll(async () => {
    pg = await testPg();
    otherSql = createPg({ url: TEST_DATABASE_URL, max: 4, schema: pg.schema });
    producer = testKafka().producer();
    await producer.connect();
  });

  afterEach(async () => {
    for (const release of releases) release();
    await Promise.all(relays.map((relay) => relay.stop()));
    relays = [];
  });

  afterAll(async () => {
    await producer?.disconnect();
    await otherSql?.end({ timeout: 5 });
    await pg?.drop();
  });

  const row = (topic: string, id: string, dueInMs: number): OutboxRow => ({
    taskId: `${id}:0`,
    requestId: id,
    dueAt: new Date(Date.now() + dueInMs),
    topic,
    key: '!p',
    payload: Buffer.from(JSON.stringify({ meta: { requestId: id, partition: '!p' } })),
  });

  const idsOf = (records: Array<{ value: Buffer | null }>) =>
    records.map((record) => JSON.parse(String(record.value)).meta.requestId as string);

  /** A producer whose first send waits until the test lets it go; `held` resolves once it waits. */
  function heldOnce(): { producer: KafkaProducer; held: Promise<void>; release: () => void } {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    releases.push(release);
    let onHeld = () => {};
    const held = new Promise<void>((resolve) => {
      onHeld = resolve;
    });
    let first = true;
    return {
      held,
      release,
      producer: {
        connect: () => producer.connect(),
        disconnect: () => producer.disconnect(),
        partitionCount: (topic) => producer.partitionCount(topic),
        async send(...args) {
          if (first) {
            first = false;
            onHeld();
            await released;
          }
          return producer.send(...args);
        },
      },
    };
  }

  /** A producer that counts its sends. */
  function counting(): { producer: KafkaProducer; sends: () => number } {
    let sends = 0;
    return {
      sends: () => sends,
      producer: {
        connect: () => producer.connect(),
        disconnect: () => producer.disconnect(),
        partitionCount: (topic) => producer.partitionCount(topic),
        send(...args) {
          sends++;
          return producer.send(...args);
        },
      },
    };
  }

  const relayOn = (sql: Sql, relayProducer: KafkaProducer) =>
    new Relay({
      outbox: new Outbox(sql),
      producer: relayProducer,
      logger: silentLogger,
      workers: 1,
      batch: 1,
      produceTimeoutMs: 5_000,
    });

  /** The sessions holding (granted) or waiting for the relay turn of the outbox of `sql`. */
  const turnSessions = (sql: Sql = pg.sql) => new Outbox(sql).turnSessions();

  it("produces the second relay's claim after the first relay's, however long that produce takes", async () => {
    const topic = uniqueName('relay.processes');
    await createTestTopics([topic], 1);
    await new Outbox(pg.sql).add([row(topic, 'a', -10_000), row(topic, 'b', -5_000)]);
    const first = heldOnce();
    relays.push(relayOn(pg.sql, first.producer));
    await relays[0]?.start();
    await first.held; // the first relay claimed a (batch 1) and is producing it
    const second = counting();
    relays.push(relayOn(otherSql, second.producer));
    await relays[1]?.start();
    // Either the second relay claimed b and produced it (the race), or it waits for the turn.
    await eventually(
      async () => second.sends() > 0 || (await turnSessions()).some((s) => !s.granted),
      30_000,
      'the second relay producing, or waiting for the turn',
    );
    first.release();
    const records = await readTopic(topic, (messages) => messages.length >= 2);
    expect(idsOf(records)).toEqual(['a', 'b']);
  });

  it('a relay whose turn session is terminated, holding or waiting, takes turns again', async () => {
    const topic = uniqueName('relay.processes');
    await createTestTopics([topic], 1);
    const outbox = new Outbox(pg.sql);
    await outbox.add([row(topic, 'a', -10_000), row(topic, 'b', -5_000)]);
    const first = heldOnce();
    relays.push(relayOn(pg.sql, first.producer));
    await relays[0]?.start();
    await first.held;
    const second = relayOn(otherSql, producer);
    relays.push(second);
    await second.start();
    let waiting: number | undefined;
    await eventually(
      async () => {
        waiting = (await turnSessions()).find((s) => !s.granted)?.pid;
        return waiting !== undefined;
      },
      30_000,
      'the second relay waiting for the turn',
    );
    // The waiting session dies: the second relay fails that round, then waits again on another.
    await pg.sql`select pg_terminate_backend(${waiting as number})`;
    await eventually(
      async () => (await turnSessions()).some((s) => !s.granted && s.pid !== waiting),
      30_000,
      'the second relay waiting again on a new session',
    );
    // The holding session dies: the turn passes to the second relay, which produces b.
    const holder = (await turnSessions()).find((s) => s.granted)?.pid as number;
    await pg.sql`select pg_terminate_backend(${holder})`;
    await readTopic(topic, (messages) => idsOf(messages).includes('b'));
    // The first relay's produce ends; its turn's give-back finds the session gone.
    first.release();
    await readTopic(topic, (messages) => idsOf(messages).includes('a'));
    // With the second relay gone, the first one alone moves a new row: it took the turn again.
    await second.stop();
    relays = relays.filter((relay) => relay !== second);
    await outbox.add([row(topic, 'c', -1_000)]);
    await readTopic(topic, (messages) => idsOf(messages).includes('c'));
    await eventually(async () => (await outbox.count()) === 0, 30_000, 'an empty outbox');
  });

  it('both relays ride out PostgreSQL killed while one holds the turn and the other waits for it', async () => {
    const topic = uniqueName('relay.processes');
    await createTestTopics([topic], 1);
    const server = await startPrivatePostgres();
    const url = `${server.url}/requester`;
    await ensureDatabase(url);
    const sqlA = createPg({ url, max: 4 });
    const sqlB = createPg({ url, max: 4 });
    try {
      await migrate(sqlA);
      const outbox = new Outbox(sqlA);
      await outbox.add([row(topic, 'a', -10_000), row(topic, 'b', -5_000)]);
      const first = heldOnce();
      relays.push(relayOn(sqlA, first.producer), relayOn(sqlB, producer));
      await relays[0]?.start();
      await first.held;
      await relays[1]?.start();
      await eventually(
        async () => (await turnSessions(sqlA)).some((s) => !s.granted),
        30_000,
        'the second relay waiting for the turn',
      );
      await server.kill();
      // The first relay's produce ends while PostgreSQL is down: its give-back and delete fail.
      first.release();
      await server.restart();
      await outbox.add([row(topic, 'c', -1_000)]);
      await readTopic(topic, (messages) => ['a', 'b', 'c'].every((id) => idsOf(messages).includes(id)));
      await eventually(async () => (await outbox.count()) === 0, 60_000, 'an empty outbox');
    } finally {
      for (const release of releases) release();
      await Promise.all(relays.map((relay) => relay.stop()));
      relays = [];
      await sqlA.end({ timeout: 5 });
      await sqlB.end({ timeout: 5 });
      await server.stop();
    }
  }, 120_000);
});
