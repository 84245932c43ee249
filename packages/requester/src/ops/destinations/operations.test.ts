import { setTimeout as sleep } from 'node:timers/promises';
import { CircuitBreaker, RateLimiter } from '@requester/policies';
import {
  buildResult,
  createPg,
  createRedis,
  deadLetterMessage,
  type KafkaProducer,
  parseRequestEnvelope,
} from '@requester/shared';
import { destinationLimiterKey } from '@requester/shared/destinations';
import { createTestTopics, readTopic, testKafka, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requesterInProcess } from '../../../test/cli.fixture.ts';

/**
 * `requester destinations recover`: the dead letters of requests that named a destination, failed
 * within the range, are re-sent to `in`, each once; other destinations' and out-of-range ones stay.
 */
const name = uniqueName('recover');
const database = name.replaceAll('-', '_');
const env = {
  REDIS_PREFIX: name,
  DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${database}`,
  KAFKA_TOPIC_IN: `${name}.in`,
  KAFKA_TOPIC_OUT: `${name}.out`,
  KAFKA_TOPIC_DLQ: `${name}.dlq`,
  KAFKA_TOPIC_EVENTS: `${name}.events`,
  KAFKA_TOPIC_PARTITIONS: '1',
  LOG_LEVEL: 'error',
};
const cli = (...args: string[]) => requesterInProcess(['destinations', ...args], env);

/** A dead letter of a request to `destination` (undefined: an absolute URI), failed at `failedAt`. */
function deadLetter(requestId: string, destination: string | undefined, failedAt: string) {
  const envelope = parseRequestEnvelope({
    request: destination ? { uri: '/v2/invoices', method: 'POST' } : { uri: 'https://other.example/x' },
    meta: { requestId, ...(destination ? { destination } : {}) },
    createdAt: '2026-12-06T08:00:00Z',
  });
  return deadLetterMessage({
    envelope,
    result: buildResult({ requestId, status: 503, body: 'down', tryCount: 3 }),
    reason: 'retries_exhausted',
    source: { topic: env.KAFKA_TOPIC_IN, partition: 0, offset: '0' },
    failedAt: Date.parse(failedAt),
  });
}

describe('requester destinations recover and status', () => {
  let producer: KafkaProducer;

  beforeAll(async () => {
    await createTestTopics([env.KAFKA_TOPIC_IN, env.KAFKA_TOPIC_DLQ], 1);
    const created = await cli('create', 'billing', '--base-url', 'https://api.partner.example');
    expect(created.code, created.stderr).toBe(0);
    producer = testKafka().producer();
    await producer.connect();
    await producer.send(env.KAFKA_TOPIC_DLQ, [
      deadLetter('before', 'billing', '2026-12-06T08:59:59Z'),
      deadLetter('in-1', 'billing', '2026-12-06T09:00:00Z'),
      deadLetter('other', 'shipping', '2026-12-06T09:10:00Z'),
      deadLetter('absolute', undefined, '2026-12-06T09:20:00Z'),
      deadLetter('in-2', 'billing', '2026-12-06T10:29:59Z'),
      deadLetter('after', 'billing', '2026-12-06T10:30:00Z'),
    ]);
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    const keys = await redis.keys(`${name}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
    await admin.unsafe(`drop database if exists "${database}" with (force)`).catch(() => {});
    await admin.end({ timeout: 5 });
  });

  it('previews, then re-sends exactly the range of that destination, once', async () => {
    const range = ['--since', '2026-12-06T09:00:00Z', '--until', '2026-12-06T10:30:00Z'];
    const preview = await cli('recover', 'billing', ...range, '--dry-run', '--json');
    expect(preview.code, preview.stderr).toBe(0);
    const previewed = JSON.parse(preview.stdout) as { replayed: Array<{ requestId: string }> };
    expect(previewed.replayed.map((r) => r.requestId).sort()).toEqual(['in-1', 'in-2']);

    const run = await cli('recover', 'billing', ...range, '--json');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/replayed 2\/2/);
    const sent = await readTopic(env.KAFKA_TOPIC_IN, (m) => m.length >= 2);
    expect(sent.map((m) => JSON.parse(String(m.value)).meta.requestId).sort()).toEqual(['in-1', 'in-2']);

    // Run again: each once, nothing more is sent.
    const again = await cli('recover', 'billing', ...range, '--json');
    expect(again.code, again.stderr).toBe(0);
    expect((JSON.parse(again.stdout) as { replayed: unknown[] }).replayed).toHaveLength(0);
  }, 120_000);

  it('refuses an unknown destination and a recover without --since, saying why', async () => {
    const unknown = await cli('recover', 'nobody', '--since', '2026-12-06T09:00:00Z');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no destination named nobody');
    const open = await cli('recover', 'billing');
    expect(open.code).toBe(2);
    expect(open.stderr).toContain('needs --since');
  }, 60_000);

  it('status shows its origin’s breaker and its quota as every executor shares them', async () => {
    // A fixed window starts on the clock's hour: two takes read back as "used 2" only if no window
    // boundary falls between them and the status (with a minute's window, 1 run in ~30 did).
    const leftInHourMs = 3_600_000 - (Date.now() % 3_600_000);
    if (leftInHourMs < 30_000) await sleep(leftInHourMs + 100);
    const created = await cli(
      'create',
      'quota',
      '--base-url',
      'https://quota.example:8443/v1',
      '--rate',
      '5/1h',
      '--algorithm',
      'fixed-window-counter',
    );
    expect(created.code, created.stderr).toBe(0);
    const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    try {
      const limiter = new RateLimiter({ redis, prefix: `${name}:` });
      const rates = [{ duration: '1h', value: 5 }];
      for (let i = 0; i < 2; i++)
        expect(
          (
            await limiter.take({
              key: destinationLimiterKey('quota'),
              algorithm: 'fixed-window-counter',
              rates,
            })
          ).allowed,
        ).toBe(true);
      const breaker = new CircuitBreaker({
        redis,
        prefix: `${name}:breaker:`,
        failureThreshold: 1,
        openMs: 600_000,
        stateCacheMs: 0,
      });
      const origin = 'https://quota.example:8443';
      const admission = await breaker.admit(origin);
      if (admission.admitted) await breaker.record(origin, { ...admission, success: false });
    } finally {
      redis.disconnect();
    }
    const status = await cli('status', 'quota', '--json');
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      destination: 'quota',
      version: 1,
      pause: null,
      origin: { origin: 'https://quota.example:8443', breaker: { state: 'open' }, pause: null },
      quota: [expect.objectContaining({ value: 5, used: 2 })],
    });
    const table = await cli('status', 'quota');
    expect(table.stdout).toMatch(/quota v1\s+https:\/\/quota\.example:8443\s+open\s+on\s+no/);
  }, 60_000);
});
