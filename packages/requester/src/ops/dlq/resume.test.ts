import { randomBytes } from 'node:crypto';
import {
  buildResult,
  createRedis,
  deadLetterMessage,
  EntrySigner,
  type Fetcher,
  type KafkaProducer,
  parseRequestEnvelope,
  type RedisClient,
} from '@requester/shared';
import { createTestTopics, readTopic, testKafka, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DlqSource, ReplayMarks, type ReplayTarget, replayDeadLetters } from './topic.ts';

/**
 * A replay by filter that dies halfway (its producer fails on the second chunk of 500, as a
 * process killed mid-run would stop) is finished by running it again: the first chunk was marked
 * once Kafka had it, so the rerun skips it and replays the rest. Every dead letter reaches `in`
 * once; none twice, none lost.
 */
describe('dlq replay by filter: resumable by rerunning', () => {
  const name = uniqueName('dlq-resume');
  const topics = { in: `${name}.in`, dlq: `${name}.dlq` };
  const total = 1_200;
  let redis: RedisClient;
  let producer: KafkaProducer;
  let reader: Fetcher;
  let source: DlqSource & { reader: Fetcher };
  const signer = new EntrySigner(randomBytes(32));

  beforeAll(async () => {
    await createTestTopics([topics.in, topics.dlq], 2);
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    producer = testKafka().producer();
    await producer.connect();
    const records = Array.from({ length: total }, (_, i) => {
      const requestId = `${name}-${i}`;
      const envelope = parseRequestEnvelope({
        request: { uri: 'https://api.partner.example/orders', method: 'POST' },
        meta: { requestId, retry: { max: 1 } },
        createdAt: '2026-11-30T06:00:00Z',
      });
      return deadLetterMessage({
        envelope,
        result: buildResult({ requestId, status: 503, body: 'down', tryCount: 1 }),
        reason: 'retries_exhausted',
        source: { topic: topics.in, partition: 0, offset: String(i) },
        failedAt: Date.parse('2026-11-30T06:01:00Z') + i,
      });
    });
    for (let i = 0; i < total; i += 400) await producer.send(topics.dlq, records.slice(i, i + 400));
    reader = testKafka().fetcher();
    source = { kafka: testKafka(), topic: topics.dlq, reader };
  }, 120_000);

  afterAll(async () => {
    await Promise.all([producer?.disconnect(), reader?.close()]);
    const keys = await redis.keys(`${name}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis?.disconnect();
  });

  it('a run killed after its first chunk, then run again: every dead letter replayed once', async () => {
    const target = (p: Pick<KafkaProducer, 'send'>): ReplayTarget => ({
      producer: p as KafkaProducer,
      topicIn: topics.in,
      marks: new ReplayMarks(redis, name),
      produceTimeoutMs: 30_000,
      signer: async () => signer,
    });
    const options = { filter: { sinceMs: Date.parse('2026-11-30T00:00:00Z') }, dryRun: false, force: false };

    const preview = await replayDeadLetters(source, target(producer), { ...options, dryRun: true });
    expect(preview.replayed).toHaveLength(total);

    let sends = 0;
    const dying = {
      send: async (...args: Parameters<KafkaProducer['send']>) => {
        if (++sends > 1) throw new Error('killed mid-run');
        return producer.send(...args);
      },
    };
    await expect(replayDeadLetters(source, target(dying), options)).rejects.toThrow('killed mid-run');

    const progress: Array<[number, number]> = [];
    const rerun = await replayDeadLetters(
      source,
      { ...target(producer), onReplayed: (done, of) => progress.push([done, of]) },
      options,
    );
    expect(rerun.skipped.alreadyReplayed).toBe(500);
    expect(rerun.replayed).toHaveLength(total - 500);
    expect(progress.at(-1)).toEqual([total - 500, total - 500]);

    // Exactly `total` records on in (none twice), one per request (none lost).
    const admin = testKafka().admin();
    await admin.connect();
    const offsets = await admin.topicOffsets(topics.in);
    await admin.disconnect();
    expect(offsets.reduce((sum, p) => sum + Number(p.high), 0)).toBe(total);
    const written = await readTopic(topics.in, (seen) => seen.length >= total, 60_000);
    const ids = written.map(
      (r) => (JSON.parse(String(r.value)) as { meta: { requestId: string } }).meta.requestId,
    );
    expect(ids).toHaveLength(total);
    expect(new Set(ids).size).toBe(total);
    const again = await replayDeadLetters(source, target(producer), options);
    expect(again.replayed).toEqual([]);
    expect(again.skipped.alreadyReplayed).toBe(total);
  }, 180_000);
});
