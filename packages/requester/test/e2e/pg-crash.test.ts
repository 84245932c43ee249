import type { KafkaProducer } from '@requester/shared';
import {
  createTestTopics,
  eventually,
  type PrivatePostgres,
  startPrivatePostgres,
  startTarget,
  type Target,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  spawnRequester,
  stackEnv,
  stackSql,
  waitReady,
} from './stack.fixture.ts';

/**
 * docs/architecture.md §7: no task is lost when a dependency restarts. PostgreSQL holds the outbox (tasks due
 * beyond the Redis horizon). It is killed with SIGKILL while scheduled tasks wait in the outbox and
 * more arrive on `in`, and started again a moment later on the same data (WAL recovery): the
 * running requester — router writing rows, relay moving due rows back to `in` — rides it out and
 * every task, scheduled or immediate, is answered.
 */
describe('PostgreSQL killed (kill -9) and restarted while scheduled tasks wait in the outbox', () => {
  const SCHEDULED = 100;
  const IMMEDIATE = 100;
  /** Sent before the crash; the rest arrive on `in` while PostgreSQL is down. */
  const SCHEDULED_BEFORE = 60;
  const IMMEDIATE_BEFORE = 50;
  let pg: PrivatePostgres;
  let stack: StackEnv;
  let target: Target;
  let results: ResultCollector;
  let producer: KafkaProducer;

  beforeAll(async () => {
    pg = await startPrivatePostgres();
    target = await startTarget();
    // RELAY_STAGE_AHEAD 1 s: the scheduled tasks (due 3–6 s ahead) wait in the outbox until 1 s
    // before they are due. With the default (60 s) the relay stages each row back to `in` as soon
    // as it is written, and whether half of them are ever in the outbox at once (the crash's
    // moment) was a race between the router's inserts and the relay's claims.
    stack = await stackEnv({
      DATABASE_URL: `${pg.url}/requester`,
      MAX_WORKERS: '16',
      RELAY_STAGE_AHEAD: '1s',
    });
    const { topicIn, topicOut, topicDlq } = stack.config;
    await createTestTopics([topicIn, topicOut, topicDlq], 3);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    producer = await kafkaProducer();
  });

  // No dropStackDatabase: it drops the database of that name on the shared PostgreSQL, while this
  // stack's database lives on the private server, whose data folder stop() removes.
  afterAll(async () => {
    await producer?.disconnect();
    await results?.stop();
    await target?.close();
    await pg?.stop();
  }, 60_000);

  /** Scheduled tasks `s-<from…to-1>` due 3–6 s from now (beyond the 1 s horizon: the outbox), and immediate ones. */
  const send = (scheduled: [number, number], immediate: [number, number]) => {
    const now = Date.now();
    const count = scheduled[1] - scheduled[0];
    const envelope = (requestId: string, dueInMs?: number) => ({
      key: requestId,
      value: JSON.stringify({
        request: { uri: `${target.url}/echo`, body: requestId },
        meta: {
          requestId,
          ...(dueInMs === undefined ? {} : { scheduled: new Date(now + dueInMs).toISOString() }),
        },
      }),
    });
    const messages = [];
    for (let i = scheduled[0]; i < scheduled[1]; i++)
      messages.push(envelope(`s-${i}`, 3_000 + Math.round(((i - scheduled[0]) / count) * 3_000)));
    for (let i = immediate[0]; i < immediate[1]; i++) messages.push(envelope(`i-${i}`));
    return producer.send(stack.config.topicIn, messages);
  };

  it('every task ends up on out', async () => {
    const requester = spawnRequester(stack);
    let outboxAtCrash = 0;
    let atCrash = 0;
    try {
      await waitReady(stack);
      await send([0, SCHEDULED_BEFORE], [0, IMMEDIATE_BEFORE]);
      const sql = stackSql(stack);
      try {
        await eventually(
          async () => {
            const [row] = await sql`select count(*)::int as n from outbox where request_id like 's-%'`;
            outboxAtCrash = row?.n as number;
            return outboxAtCrash >= SCHEDULED_BEFORE / 2;
          },
          30_000,
          'scheduled tasks in the PostgreSQL outbox',
        );
      } finally {
        await sql.end({ timeout: 5 });
      }
      await pg.kill();
      atCrash = results.byId.size;
      // Kafka is up: tasks keep arriving on `in` while the outbox cannot take them.
      await send([SCHEDULED_BEFORE, SCHEDULED], [IMMEDIATE_BEFORE, IMMEDIATE]);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await pg.restart();
      await results.until(
        () => results.byId.size >= SCHEDULED + IMMEDIATE,
        120_000,
        `all ${SCHEDULED + IMMEDIATE} results`,
      );
      // Every row leaves the outbox once delivered (a row relayed just before the crash may be
      // delivered twice — at least once is the promise — but none stays behind).
      const after = stackSql(stack);
      try {
        await eventually(
          async () => (await after`select count(*)::int as n from outbox`)[0]?.n === 0,
          30_000,
          'an empty outbox',
        );
      } finally {
        await after.end({ timeout: 5 });
      }
    } finally {
      requester.child.kill('SIGTERM');
      await requester.exited;
    }
    expect(outboxAtCrash).toBeGreaterThan(0);
    expect(atCrash).toBeLessThan(SCHEDULED + IMMEDIATE);
    const ids = [
      ...Array.from({ length: SCHEDULED }, (_, i) => `s-${i}`),
      ...Array.from({ length: IMMEDIATE }, (_, i) => `i-${i}`),
    ];
    expect(ids.filter((id) => !results.byId.has(id))).toEqual([]);
    for (const id of ids) expect(results.byId.get(id)?.[0]?.response.status).toBe(200);
  }, 240_000);
});
