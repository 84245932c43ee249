import { createKafka, type ResultEnvelope } from '@requester/shared';
import {
  type PrivateKafka,
  type PrivatePostgres,
  type PrivateRedis,
  silentLogger,
  startPrivateKafka,
  startPrivatePostgres,
  startPrivateRedis,
  startTarget,
  type Target,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import { type StackEnv, stackEnv, stackKey, startStack, waitReady } from './stack.fixture.ts';

/**
 * Requester's links to its dependencies with credentials: a Kafka broker with a SCRAM
 * (SASL_PLAINTEXT) listener, a Redis that requires an ACL user and password, a PostgreSQL with
 * password authentication — each a private server of this test. The whole path works with the
 * right credentials, and a wrong one stops the process at start with a message naming the
 * dependency and the variables to check (never the password).
 */
describe('authenticated Kafka (SCRAM), Redis (ACL user) and PostgreSQL (password)', () => {
  const KAFKA_USERS = [
    { username: 'requester', password: 'kafka-secret-1' },
    { username: 'producer', password: 'producer-secret-2' },
  ];
  let kafka: PrivateKafka;
  let redis: PrivateRedis;
  let pg: PrivatePostgres;
  let target: Target;
  let stack: StackEnv;
  let running: RunningProcess;
  let key: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    // Each kept as soon as it is up: when one fails to start, afterAll still stops the others.
    const started = await Promise.allSettled([
      startPrivateKafka({ sasl: KAFKA_USERS }).then((k) => {
        kafka = k;
      }),
      startPrivateRedis({ user: 'requester', password: 'redis-secret-3' }).then((r) => {
        redis = r;
      }),
      startPrivatePostgres({ password: 'pg-secret-4' }).then((p) => {
        pg = p;
      }),
      startTarget().then((t) => {
        target = t;
      }),
    ]);
    for (const outcome of started) if (outcome.status === 'rejected') throw outcome.reason;
    stack = await stackEnv({
      KAFKA_BROKERS: kafka.brokers,
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: 'requester',
      KAFKA_SASL_PASSWORD: 'kafka-secret-1',
      REDIS_URL: redis.url,
      DATABASE_URL: `${pg.url}/requester`,
      SYNC_TIMEOUT: '20s',
    });
    running = await startStack(stack);
    await waitReady(stack);
    key = await stackKey(stack, { kafkaEntry: true }); // the direct producer below claims its name
  }, 180_000);

  afterAll(async () => {
    await running?.shutdown('test over');
    await Promise.all([kafka?.stop(), redis?.stop(), pg?.stop(), target?.close()]);
  }, 90_000);

  const post = (body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...key.headers },
      body: JSON.stringify(body),
    });
  const poll = (id: string) => fetch(`${stack.httpUrl}/requests/${id}?wait=20s`, { headers: key.headers });

  it('answers a sync call, an outbox-scheduled request and a direct producer’s request end to end', async () => {
    const sync = await post({
      request: { uri: `${target.url}/echo`, method: 'POST', body: 'through every lock' },
      meta: { requestId: 'sec-sync', sync: true },
    });
    expect(sync.status).toBe(200);
    expect((await sync.json()) as ResultEnvelope).toMatchObject({
      response: { status: 200, body: 'through every lock' },
      meta: { client: key.name },
    });

    // Beyond REDIS_HORIZON: router → PostgreSQL outbox → relay → in → executor.
    const scheduled = new Date(Date.now() + 2_500).toISOString();
    const later = await post({
      request: { uri: '', body: 'later' },
      meta: { requestId: 'sec-later', scheduled },
    });
    expect(later.status).toBe(202);

    // A direct producer, authenticated by the broker as another user; it labels its request
    // with the key's name (allowed for Kafka entry), so that key may long-poll the result.
    const producerKafka = createKafka({
      brokers: kafka.brokers,
      clientId: 'sec-producer',
      logger: silentLogger,
      security: { sasl: { mechanism: 'scram-sha-256', ...KAFKA_USERS[1]! } },
    });
    const producer = producerKafka.producer();
    await producer.connect();
    try {
      await producer.send(stack.config.topicIn, [
        {
          key: 'sec-kafka',
          value: JSON.stringify({
            request: { uri: '', body: 'by kafka' },
            meta: { requestId: 'sec-kafka', client: key.name },
          }),
        },
      ]);
    } finally {
      await producer.disconnect();
    }

    for (const [id, body] of [
      ['sec-kafka', 'by kafka'],
      ['sec-later', 'later'],
    ] as const) {
      const res = await poll(id);
      expect(res.status, id).toBe(200);
      expect(await res.json()).toMatchObject({
        response: { body },
        meta: { requestId: id, client: key.name },
      });
    }
  }, 60_000);

  it('stops at start on a wrong credential, naming the dependency and never the password', async () => {
    const env = { ...stack.env, HTTP_PORT: '0', ADMIN_PORT: '0', AUTH: 'off' };
    const runs = await Promise.all([
      requester(['--role', 'ingress'], { ...env, KAFKA_SASL_PASSWORD: 'wrong-kafka-password' }).exit,
      requester(['--role', 'router'], {
        ...env,
        REDIS_URL: redis.url.replace('redis-secret-3', 'wrong-redis-password'),
      }).exit,
      requester(['--role', 'relay'], {
        ...env,
        DATABASE_URL: stack.env.DATABASE_URL!.replace('pg-secret-4', 'wrong-pg-password'),
      }).exit,
      requester(['--role', 'ingress'], { ...env, KAFKA_SASL_PASSWORD: '' }).exit,
    ]);
    const [kafkaRun, redisRun, pgRun, incomplete] = runs;
    expect(kafkaRun).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('Kafka refused the credentials'),
    });
    expect(redisRun).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('Redis refused the credentials'),
    });
    expect(pgRun).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('PostgreSQL refused the credentials'),
    });
    expect(incomplete).toMatchObject({
      code: 2,
      stderr: expect.stringContaining(
        'KAFKA_SASL_MECHANISM=scram-sha-512 needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD',
      ),
    });
    for (const run of runs) expect(run.stderr).not.toMatch(/wrong-(kafka|redis|pg)-password/);
  }, 120_000);
});
