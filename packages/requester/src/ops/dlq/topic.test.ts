import { randomBytes } from 'node:crypto';
import { FairQueue } from '@requester/queue';
import { Router } from '@requester/scheduler';
import {
  buildResult,
  createRedis,
  deadLetterMessage,
  decodeQueuedTask,
  EntrySigner,
  type Fetcher,
  type KafkaProducer,
  Outbox,
  parseRequestEnvelope,
  type RedisClient,
  type RequestEnvelope,
} from '@requester/shared';
import {
  createTestTopics,
  eventually,
  json,
  readTopic,
  silentLogger,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requesterInProcess } from '../../../test/cli.fixture.ts';
import {
  type DlqSource,
  listDeadLetters,
  ReplayMarks,
  type ReplayTarget,
  replayDeadLetters,
} from './topic.ts';

describe('requester dlq over real Kafka, Redis and a Router', () => {
  const name = uniqueName('dlq');
  const topics = { in: `${name}.in`, out: `${name}.out`, dlq: `${name}.dlq` };
  const id = (suffix: string) => `${name}-${suffix}`;
  let redis: RedisClient;
  let producer: KafkaProducer;
  let source: DlqSource & { reader: Fetcher };
  let reader: Fetcher;
  let target: ReplayTarget;
  const signer = new EntrySigner(randomBytes(32));

  /** A request that failed for good after `attempts` attempts, as the executor dead-letters it. */
  function deadLetter(
    requestId: string,
    attempts: number,
    failedAt: string,
    partition?: string,
    client?: string,
  ) {
    const envelope = parseRequestEnvelope({
      request: { uri: 'https://api.partner.example/orders', method: 'POST', body: `{"id":"${requestId}"}` },
      meta: {
        requestId,
        retry: { max: attempts },
        proxyData: { tenant: 't1' },
        ...(partition ? { partition } : {}),
        ...(client ? { client } : {}),
      },
      createdAt: '2026-11-30T06:00:00Z',
    });
    const result = buildResult({ requestId, status: 503, body: 'down', tryCount: attempts });
    const source = { topic: topics.in, partition: 0, offset: String(attempts) };
    return deadLetterMessage({
      envelope,
      result,
      reason: 'retries_exhausted',
      source,
      failedAt: Date.parse(failedAt),
    });
  }

  beforeAll(async () => {
    await createTestTopics([topics.in, topics.out, topics.dlq], 2);
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    producer = testKafka().producer();
    await producer.connect();
    await producer.send(topics.dlq, [
      deadLetter(id('a'), 3, '2026-11-30T06:01:00Z', '!order-a'),
      deadLetter(id('b'), 3, '2026-11-30T06:02:00Z'),
      deadLetter(id('c'), 1, '2026-11-30T06:03:00Z'),
    ]);
    reader = testKafka().fetcher();
    source = { kafka: testKafka(), topic: topics.dlq, reader };
    target = {
      producer,
      topicIn: topics.in,
      marks: new ReplayMarks(redis, name),
      produceTimeoutMs: 10_000,
      signer: async () => signer,
    };
  });

  afterAll(async () => {
    await Promise.all([producer.disconnect(), reader.close()]);
    const keys = await redis.keys(`${name}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  const inCount = async () => {
    const admin = testKafka().admin();
    await admin.connect();
    const offsets = await admin.topicOffsets(topics.in);
    await admin.disconnect();
    return offsets.reduce((sum, p) => sum + Number(p.high), 0);
  };

  it('lists the dead letters, most recent last, filtered by requestId and time', async () => {
    const all = await listDeadLetters(source, {}, 50);
    expect(all.entries.map((e) => e.record.envelope?.meta.requestId)).toEqual([id('a'), id('b'), id('c')]);
    expect(all).toMatchObject({ read: 3, matched: 3, unreadable: 0, incomplete: [] });

    const recent = await listDeadLetters(source, {}, 2);
    expect(recent.entries.map((e) => e.record.envelope?.meta.requestId)).toEqual([id('b'), id('c')]);

    const window = {
      sinceMs: Date.parse('2026-11-30T06:02:00Z'),
      untilMs: Date.parse('2026-11-30T06:03:00Z'),
    };
    const one = await listDeadLetters(source, window, 50);
    expect(one.entries.map((e) => e.record.envelope?.meta.requestId)).toEqual([id('b')]);
  });

  it('--dry-run says what it would replay and writes nothing', async () => {
    const summary = await replayDeadLetters(source, target, {
      filter: { requestIds: new Set([id('b')]) },
      dryRun: true,
      force: false,
    });
    expect(summary.replayed).toEqual([
      { requestId: id('b'), taskId: `${id('b')}:3`, dlq: expect.any(String) },
    ]);
    expect(await inCount()).toBe(0);
    expect(await redis.keys(`${name}:dlq-replayed:*`)).toEqual([]);
  });

  it('replays one request by id: same requestId on in, a task id the queue accepts though the old one is refused', async () => {
    const pg = await testPg();
    const queue = new FairQueue({ redis, prefix: `${name}:q:`, shards: 4, refreshMs: 0, notify: false });
    // The original attempt went through this queue: its id is in the post-ack dedup window.
    await queue.publish([{ id: `${id('b')}:0`, partition: `#${id('b')}`, payload: '{}' }]);
    const first = await queue.lease(1, 30_000);
    await queue.ackMany(first.tasks.map((t) => t.token));
    expect(await queue.publish([{ id: `${id('b')}:0`, partition: `#${id('b')}`, payload: '{}' }])).toEqual([
      'duplicate',
    ]);

    const summary = await replayDeadLetters(source, target, {
      filter: { requestIds: new Set([id('b')]) },
      dryRun: false,
      force: false,
    });
    expect(summary.replayed.map((r) => r.taskId)).toEqual([`${id('b')}:3`]);
    const [record] = await readTopic(topics.in, (m) => m.length >= 1);
    const envelope = json<RequestEnvelope>(record!);
    expect(record?.key?.toString()).toBe(id('b'));
    expect(envelope.meta.requestId).toBe(id('b'));
    expect(envelope).toMatchObject({ tryCount: 3, retryBase: 3, request: { body: `{"id":"${id('b')}"}` } });
    expect(String(record?.headers?.['requester-replay-of'])).toMatch(new RegExp(`^${topics.dlq}/\\d/\\d+$`));
    // Signed: the router keeps the replay's meta.client (docs/architecture.md §10).
    expect(signer.verify(record?.value ?? null, record?.headers)).toBe(true);

    const router = new Router({
      consumer: testKafka().consumer({ groupId: uniqueName('dlq-router') }),
      queue,
      outbox: new Outbox(pg.sql),
      producer,
      topicIn: topics.in,
      topicOut: topics.out,
      horizonMs: 1_000,
      produceTimeoutMs: 10_000,
      logger: silentLogger,
    });
    await router.start();
    try {
      const leased: Awaited<ReturnType<FairQueue['lease']>>['tasks'] = [];
      await eventually(
        async () => {
          leased.push(...(await queue.lease(10, 30_000)).tasks);
          return leased.length > 0;
        },
        20_000,
        'the replay routed into the queue',
      );
      expect(leased.map((t) => t.id)).toEqual([`${id('b')}:3`]);
      expect(decodeQueuedTask(leased[0]?.payload ?? '')).toMatchObject({ requestId: id('b'), tryCount: 3 });
      await queue.ackMany(leased.map((t) => t.token));
    } finally {
      await router.stop();
      await pg.drop();
    }
  });

  it('a second run skips what was replayed; --force replays it again under a task id new to the dedup', async () => {
    const again = await replayDeadLetters(source, target, {
      filter: { requestIds: new Set([id('b')]) },
      dryRun: false,
      force: false,
    });
    expect(again.replayed).toEqual([]);
    expect(again.skipped.alreadyReplayed).toBe(1);
    expect(await inCount()).toBe(1);

    const forced = await replayDeadLetters(source, target, {
      filter: { requestIds: new Set([id('b')]) },
      dryRun: false,
      force: true,
    });
    // Past every id the first replay (budget of at most 100 attempts from 3) could have used.
    expect(forced.replayed.map((r) => r.taskId)).toEqual([`${id('b')}:104`]);
    expect(await inCount()).toBe(2);
    const mark = await redis.get(`${name}:dlq-replayed:${forced.replayed[0]?.dlq}`);
    expect(JSON.parse(mark ?? '{}')).toMatchObject({ tryCount: 104 });
  });

  it('replays only the latest dead letter of a request, in arrival order, within --limit', async () => {
    await producer.send(topics.dlq, [deadLetter(id('a'), 6, '2026-11-30T07:00:00Z', '!order-a')]);
    const summary = await replayDeadLetters(source, target, {
      filter: { requestIds: new Set([id('a'), id('c')]) },
      limit: 1,
      dryRun: true,
      force: false,
    });
    expect(summary.skipped).toEqual({ alreadyReplayed: 0, superseded: 1, overLimit: 1, unprocessable: 0 });
    expect(summary.replayed.map((r) => r.taskId)).toEqual([`${id('c')}:1`]); // in-offset 1 arrived before 6
    const both = await replayDeadLetters(source, target, {
      filter: { requestIds: new Set([id('a')]) },
      dryRun: true,
      force: false,
    });
    expect(both.replayed.map((r) => r.taskId)).toEqual([`${id('a')}:6`]);
    // Selected by position (the UI's checkboxes): the selected record, not the request's latest.
    const listed = await listDeadLetters(source, { requestIds: new Set([id('a')]) }, 50);
    const older = listed.entries.find((e) => e.record.result.meta.tryCount === 3)?.at;
    expect(older).toBeDefined();
    const ref = `${older?.topic}/${older?.partition}/${older?.offset}`;
    const selected = await replayDeadLetters(source, target, {
      filter: { refs: new Set([ref]) },
      dryRun: true,
      force: false,
    });
    expect(selected.replayed.map((r) => r.taskId)).toEqual([`${id('a')}:3`]);
    expect(selected.skipped.superseded).toBe(0);
    expect((await listDeadLetters(source, { refs: new Set([ref]) }, 50)).entries.map((e) => e.at)).toEqual([
      older,
    ]);
  });

  describe('the CLI', () => {
    const env = {
      KAFKA_TOPIC_DLQ: topics.dlq,
      KAFKA_TOPIC_IN: topics.in,
      REDIS_PREFIX: name,
      LOG_LEVEL: 'error',
    };

    it('dlq list --json prints one JSON array on stdout and its progress on stderr', async () => {
      const { code, stdout, stderr } = await requesterInProcess(
        ['dlq', 'list', '--json', '--limit', '2'],
        env,
      );
      expect(code).toBe(0);
      const lines = JSON.parse(stdout) as Array<{ envelope: { meta: { requestId: string } }; dlq: unknown }>;
      expect(lines.map((l) => l.envelope.meta.requestId)).toEqual([id('c'), id('a')]);
      expect(lines[0]?.dlq).toMatchObject({ topic: topics.dlq });
      expect(stderr).toMatch(/dlq list: read 4 records, 4 matched, showing 2/);
    });

    it('dlq replay needs a selection (exit 2), and --dry-run --json prints the summary', async () => {
      const refused = await requesterInProcess(['dlq', 'replay'], env);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/replay needs a selection/);

      const dry = await requesterInProcess(
        ['dlq', 'replay', '--request-id', id('c'), '--dry-run', '--json'],
        env,
      );
      expect(dry.code).toBe(0);
      expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, replayed: [{ taskId: `${id('c')}:1` }] });
      expect(dry.stderr).toMatch(/would replay 1/);
      expect(await inCount()).toBe(2);
    });
  });

  it("treats two clients' dead letters of one requestId as two requests: neither supersedes the other", async () => {
    await producer.send(topics.dlq, [
      deadLetter(id('shared'), 2, '2026-11-30T08:00:00Z', undefined, 'probe-a'),
      deadLetter(id('shared'), 3, '2026-11-30T08:01:00Z', undefined, 'probe-b'),
    ]);
    const summary = await replayDeadLetters(source, target, {
      filter: { requestIds: new Set([id('shared')]) },
      dryRun: true,
      force: false,
    });
    expect(summary.skipped.superseded).toBe(0);
    expect(summary.replayed.map((r) => r.taskId).sort()).toEqual([
      `${id('shared')}:2 @probe-a`,
      `${id('shared')}:3 @probe-b`,
    ]);
  });
});
