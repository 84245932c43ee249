import { createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config/index.ts';
import {
  createTestTopics,
  freePort,
  silentLogger,
  startPrivateRedis,
  TEST_KAFKA_BROKERS,
  uniqueName,
} from '../testing/index.ts';
import { Dependencies } from './index.ts';

describe('Dependencies.readiness', () => {
  const opened: Dependencies[] = [];
  const dependencies = (env: Record<string, string>) => {
    const deps = new Dependencies(loadConfig({ LOG_LEVEL: 'silent', ...env }), silentLogger);
    opened.push(deps);
    return deps;
  };
  afterAll(() => Promise.all(opened.map((deps) => deps.close())));

  it('checks only what the process opened', async () => {
    expect(await dependencies({}).readiness()).toEqual({});
  });

  it('answers every probe over one kept Kafka connection', async () => {
    // The probe asks the metadata of the deployment's `in` alone (see KafkaAdmin.ping).
    const topic = uniqueName('ready');
    await createTestTopics([topic], 1);
    const deps = dependencies({ KAFKA_BROKERS: TEST_KAFKA_BROKERS, KAFKA_TOPIC_IN: topic });
    const kafka = deps.kafka();
    let connects = 0;
    const admin = kafka.admin.bind(kafka);
    kafka.admin = (...args) => {
      connects++;
      return admin(...args);
    };
    for (let i = 0; i < 5; i++) expect(await deps.readiness()).toEqual({ kafka: true });
    expect(connects).toBe(1);
  });

  it('says not ready, within its deadline, when the broker does not answer', async () => {
    // A port that accepts connections and never answers: a hung broker.
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    try {
      const deps = dependencies({ KAFKA_BROKERS: `127.0.0.1:${port}` });
      deps.kafka();
      const started = Date.now();
      expect(await deps.readiness()).toEqual({ kafka: false });
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      silent.close();
    }
  });
});

describe('Dependencies.redisAnswers (the wait before the roles start)', () => {
  const opened: Dependencies[] = [];
  const dependencies = (redisUrl: string) => {
    const deps = new Dependencies(loadConfig({ LOG_LEVEL: 'silent', REDIS_URL: redisUrl }), silentLogger);
    opened.push(deps);
    return deps;
  };
  afterAll(() => Promise.all(opened.map((deps) => deps.close().catch(() => {}))));

  it('waits for a Redis that is down at the start, and resolves once it answers', async () => {
    const redis = await startPrivateRedis();
    try {
      await redis.kill();
      const deps = dependencies(redis.url);
      let answered = false;
      const waiting = deps.redisAnswers().then(() => {
        answered = true;
      });
      // Still waiting after several failed pings: the process would have exited here before.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(answered).toBe(false);
      await redis.restart();
      await waiting;
      expect(await deps.redis().ping()).toBe('PONG');
    } finally {
      await redis.stop();
    }
  }, 60_000);

  it('gives up with a clear error when Redis never answers within the wait', async () => {
    const port = await freePort();
    const deps = dependencies(`redis://127.0.0.1:${port}`);
    await expect(deps.redisAnswers(500)).rejects.toThrow(
      /Redis did not answer within \d+ s of the start \(REDIS_URL\)/,
    );
  }, 60_000);

  it('fails at once on refused credentials: waiting would not fix them', async () => {
    const redis = await startPrivateRedis({ password: 'right-password' });
    try {
      const deps = dependencies(redis.url.replace('right-password', 'wrong-password'));
      await expect(deps.redisAnswers(120_000)).rejects.toThrow(/refused the credentials/);
    } finally {
      await redis.stop();
    }
  }, 60_000);
});
