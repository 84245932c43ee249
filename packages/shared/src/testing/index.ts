import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createKafka, type KafkaClient, type KafkaConsumer, type KafkaRecord } from '../kafka/index.ts';
import { createLogger, type Logger } from '../log/index.ts';
import { createPg, ensureDatabase, migrate, type Sql } from '../pg/index.ts';
import { deleteWhenFileEnds } from './topics.ts';

/**
 * Helpers for tests that talk to the real local Kafka, Redis and PostgreSQL: unique names so test
 * files can run in parallel, and readers that wait for what they expect (bounded, never sleeping
 * a fixed time). Imported as `@requester/shared/testing`; never used by production code.
 */
export const TEST_KAFKA_BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
export const TEST_DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/requester_test';
export const silentLogger = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/** A JSON line of a capturingLogger: pino's numeric level, the message, and the bound fields. */
export type LoggedLine = { level: number; msg: string } & Record<string, unknown>;

/** A logger whose lines a test reads back (`lines`, in order), from `level` up (default debug). */
export function capturingLogger(level = 'debug'): { logger: Logger; lines: LoggedLine[] } {
  const lines: LoggedLine[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)) as LoggedLine);
      done();
    },
  });
  return { logger: pino({ level }, stream), lines };
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

export function testKafka(clientId = uniqueName('test')): KafkaClient {
  return createKafka({ brokers: TEST_KAFKA_BROKERS, clientId, logger: silentLogger });
}

/** Creates `topics` on the shared test broker; they are deleted when the test file ends. */
export async function createTestTopics(topics: string[], numPartitions = 3): Promise<void> {
  deleteWhenFileEnds(topics);
  const admin = testKafka().admin();
  await admin.connect();
  try {
    await admin.ensureTopics(topics.map((topic) => ({ topic, numPartitions, replicationFactor: 1 })));
  } finally {
    await admin.disconnect();
  }
}

/** A PostgreSQL pool on a fresh, migrated schema of the test database; `drop()` removes it. */
export async function testPg(): Promise<{ sql: Sql; schema: string; drop(): Promise<void> }> {
  await ensureDatabase(TEST_DATABASE_URL);
  const schema = uniqueName('t').replaceAll('-', '_');
  const sql = createPg({ url: TEST_DATABASE_URL, max: 4, schema });
  await migrate(sql, undefined, schema);
  return {
    sql,
    schema,
    async drop() {
      await sql.unsafe(`drop schema if exists "${schema}" cascade`);
      await sql.end({ timeout: 5 });
    },
  };
}

/**
 * Reads a topic from the beginning in a throwaway group until `until(messages)` holds, or fails
 * after `timeoutMs` saying how many messages it saw.
 */
export async function readTopic(
  topic: string,
  until: (messages: KafkaRecord[]) => boolean,
  timeoutMs = 30_000,
): Promise<KafkaRecord[]> {
  const consumer = testKafka().consumer({ groupId: uniqueName('reader') });
  const seen: KafkaRecord[] = [];
  const positions = new Set<string>();
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `readTopic(${topic}): condition not met after ${timeoutMs} ms (${seen.length} messages)`,
            ),
          ),
        timeoutMs,
      );
      consumer
        .start({
          topics: [topic],
          fromBeginning: true,
          commit: 'after-batch',
          onBatch: async ({ partition, records }) => {
            for (const record of records) {
              // A rebalance of this throwaway group may deliver a record again: keep each offset once.
              const position = `${partition}:${record.offset}`;
              if (positions.has(position)) continue;
              positions.add(position);
              seen.push(record);
              if (until(seen)) {
                clearTimeout(timer);
                resolve();
              }
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.stop();
  }
  return seen;
}

/** Starts `consumer` on `topic`, handing each record to `onRecord` in order; offsets committed after each batch. */
export function consumeEach(
  consumer: KafkaConsumer,
  topic: string,
  onRecord: (record: KafkaRecord) => void | Promise<void>,
  fromBeginning = true,
): Promise<void> {
  return consumer.start({
    topics: [topic],
    fromBeginning,
    commit: 'after-batch',
    onBatch: async ({ records }) => {
      for (const record of records) await onRecord(record);
    },
  });
}

export function json<T = Record<string, unknown>>(message: Pick<KafkaRecord, 'value'>): T {
  return JSON.parse(message.value?.toString() ?? 'null') as T;
}

export * from './arbitraries.ts';
export * from './bench-args.ts';
export * from './certs.ts';
export * from './collector.ts';
export * from './counting-target.ts';
export * from './cpu.ts';
export * from './credentials.ts';
export * from './fault-proxy.ts';
export * from './kafka-broker.ts';
export * from './kafka-route.ts';
export * from './leftovers.ts';
export * from './memory.ts';
export * from './modules.ts';
export * from './paced-target.ts';
export * from './postgres.ts';
export * from './redis.ts';
export * from './redis-cluster.ts';
export * from './server.ts';
export * from './target.ts';
export * from './topics.ts';
