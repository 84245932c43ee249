import { readFileSync } from 'node:fs';
import {
  type Admin,
  type Consumer,
  type ConsumerConfig,
  Kafka,
  type logCreator as LogCreator,
  logLevel,
  type Message,
  Partitioners,
  type Producer,
  type RecordMetadata,
  type SASLOptions,
} from 'kafkajs';
import type { Config } from '../config/index.ts';
import { ConfigError, RequesterError } from '../errors/index.ts';
import type { Logger } from '../log/index.ts';

export type { Admin, Consumer, EachBatchPayload, Kafka, KafkaMessage, Message, Producer } from 'kafkajs';

/**
 * The one Kafka adapter (kafkajs). Everything Kafka-shaped in Requester goes through here, so the
 * client library can be swapped in one place. kafkajs logs are routed into pino.
 */
export interface KafkaSettings {
  brokers: string;
  clientId: string;
  logger: Logger;
  /** Bound on one produce round trip (acks from all in-sync replicas). */
  produceTimeoutMs?: number;
  /** TLS and SASL towards the brokers (default: neither). */
  security?: KafkaSecurity;
}

export type SaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512';

export interface KafkaSecurity {
  /** TLS to the brokers: `true` trusts the system CAs, `{ ca }` these PEM certificates. */
  ssl?: boolean | { ca: string[] };
  sasl?: SASLOptions;
}

/**
 * TLS and SASL of every Kafka client of a process, from KAFKA_SSL, KAFKA_SSL_CA and KAFKA_SASL_*.
 * A SASL mechanism without its username and password is a configuration error (named), not a
 * broker that refuses every connection later.
 */
export function kafkaSecurityFrom(config: Config): KafkaSecurity {
  const security: KafkaSecurity = {};
  if (config.kafkaSslCa) {
    try {
      security.ssl = { ca: [readFileSync(config.kafkaSslCa, 'utf8')] };
    } catch (err) {
      throw new ConfigError(`KAFKA_SSL_CA=${config.kafkaSslCa}: ${(err as Error).message}`);
    }
  } else if (config.kafkaSsl) security.ssl = true;
  const mechanism = config.kafkaSaslMechanism;
  if (mechanism) {
    const username = config.kafkaSaslUsername;
    const password = config.kafkaSaslPassword?.reveal();
    if (!username || !password)
      throw new ConfigError(
        `KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD`,
      );
    security.sasl = { mechanism, username, password } as SASLOptions;
  }
  return security;
}

/**
 * What a Kafka error means for the operator: kafkajs names the SASL mechanism that failed, not
 * the system, and a refused login must not look like a broker that is merely down.
 */
export function explainKafkaError(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { name, message } = e as Error;
    if (name === 'KafkaJSSASLAuthenticationError' || /SASL .*authentication failed/i.test(message ?? ''))
      return `Kafka refused the credentials (KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD): ${message}`;
  }
  return undefined;
}

const LEVELS: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

export function createKafka(settings: KafkaSettings): Kafka {
  const log = settings.logger.child({ component: 'kafkajs' });
  return new Kafka({
    clientId: settings.clientId,
    brokers: settings.brokers.split(',').map((b) => b.trim()),
    ...settings.security,
    connectionTimeout: 3_000,
    requestTimeout: 30_000,
    retry: { initialRetryTime: 100, retries: 8, maxRetryTime: 5_000 },
    logLevel: logLevel.WARN,
    logCreator: kafkaLogCreator(log),
  });
}

/** Distinct kafkajs lines remembered for folding repeats (oldest forgotten first). */
const REMEMBERED_LINES = 1_000;

/**
 * Routes kafkajs logs into pino. In an outage kafkajs logs every failed connection attempt of
 * every client — dozens of identical lines a second — so a line already written within
 * `repeatWindowMs` is folded: the next one written after the window says how many it stands for
 * (`repeated`).
 */
export function kafkaLogCreator(log: Logger, repeatWindowMs = 5_000): LogCreator {
  const written = new Map<string, { at: number; folded: number }>();
  return () =>
    ({ namespace, level, log: entry }) => {
      const { message, timestamp: _ts, logger: _l, ...extra } = entry;
      const key = `${level}\0${namespace}\0${message}`;
      const now = Date.now();
      const last = written.get(key);
      if (last && now - last.at < repeatWindowMs) {
        last.folded++;
        return;
      }
      written.delete(key);
      written.set(key, { at: now, folded: 0 });
      if (written.size > REMEMBERED_LINES) written.delete(written.keys().next().value as string);
      const repeated = last?.folded ? { repeated: last.folded } : {};
      log[LEVELS[level] ?? 'info']({ namespace, ...extra, ...repeated }, String(message));
    };
}

export function createProducer(kafka: Kafka): Producer {
  return kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
    idempotent: false,
    maxInFlightRequests: 5,
  });
}

export function createConsumer(kafka: Kafka, config: ConsumerConfig): Consumer {
  return kafka.consumer({
    allowAutoTopicCreation: false,
    // A member that died (kill -9, or lost in a broker crash: kafkajs rejoins under a new member
    // id) holds its partitions until its session expires: 10 s, not kafkajs's 30 s, keeps that
    // stall short. The router heartbeats inside its batches, so slow batches do not expire it.
    sessionTimeout: 10_000,
    heartbeatInterval: 3_000,
    // An idle fetch waits at most this long: disconnect (shutdown phase 2) waits for it to return.
    maxWaitTimeInMs: 500,
    ...config,
  });
}

/**
 * Bytes of messages sent in one produce request at most. The broker checks each partition's
 * record batch against the topic's max.message.bytes: one request carrying, say, 64 results with
 * large bodies would be refused as a whole (MESSAGE_TOO_LARGE, not retriable) although every
 * message fits on its own — and retrying the same batch would fail forever. Half of the broker's
 * default limit, so that topics created elsewhere with the default are safe too.
 */
export const PRODUCE_CHUNK_BYTES = 512 * 1024;

/**
 * Produces a batch to one topic with acks from all in-sync replicas, bounded in time: a hung broker
 * surfaces as a `dependency_unavailable` error instead of a stuck caller. A batch larger than
 * PRODUCE_CHUNK_BYTES goes out as consecutive requests (in order, one at a time, so the messages of
 * one key keep their order); the metadata of all of them is returned in that order.
 */
export async function produce(
  producer: Producer,
  topic: string,
  messages: Message[],
  timeoutMs = 10_000,
): Promise<RecordMetadata[]> {
  if (messages.length === 0) return [];
  const metadata: RecordMetadata[] = [];
  for (const chunk of chunksOf(messages, PRODUCE_CHUNK_BYTES)) {
    const sent = await withTimeout(
      producer.send({ topic, messages: chunk, acks: -1, timeout: timeoutMs }),
      timeoutMs,
      `produce to ${topic} timed out after ${timeoutMs} ms`,
    );
    metadata.push(...sent);
  }
  return metadata;
}

/** Consecutive runs of messages of at most `budget` bytes each (a bigger message goes alone). */
export function chunksOf(messages: Message[], budget: number): Message[][] {
  const chunks: Message[][] = [];
  let chunk: Message[] = [];
  let bytes = 0;
  for (const message of messages) {
    const size = messageBytes(message);
    if (chunk.length > 0 && bytes + size > budget) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(message);
    bytes += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/** A message's size in a record batch, closely enough for chunking (record framing ≈ 20 bytes). */
function messageBytes(message: Message): number {
  const size = (data: Buffer | string | null | undefined) =>
    data == null ? 0 : typeof data === 'string' ? Buffer.byteLength(data) : data.length;
  let bytes = 20 + size(message.key) + size(message.value);
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    const values = Array.isArray(value) ? value : [value];
    for (const v of values) bytes += 8 + Buffer.byteLength(name) + size(v as Buffer | string | undefined);
  }
  return bytes;
}

export interface TopicSpec {
  topic: string;
  numPartitions: number;
  replicationFactor: number;
  configEntries?: Array<{ name: string; value: string }>;
}

/**
 * Creates the topics that are missing; existing ones are left as they are. Idempotent. Returns the
 * names that were missing. A broker that just started (or just created a topic) may answer
 * retriable errors while it loads — e.g. "does not host this topic-partition" while kafkajs waits
 * for leaders — so creation is asked again for up to `patienceMs` (an existing topic is no error).
 */
export async function ensureTopics(
  admin: Admin,
  topics: TopicSpec[],
  patienceMs = 30_000,
): Promise<string[]> {
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((t) => !existing.has(t.topic));
  if (missing.length === 0) return [];
  const deadline = Date.now() + patienceMs;
  for (;;) {
    try {
      await admin.createTopics({ topics: missing, waitForLeaders: true });
      return missing.map((t) => t.topic);
    } catch (err) {
      if (!isRetriableKafkaError(err) || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/**
 * Whether Kafka said "try again" (kafkajs's `retriable`), looking through the causes kafkajs wraps
 * a protocol error in when its own retries ran out.
 */
export function isRetriableKafkaError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { retriable?: boolean }).retriable === true) return true;
  }
  return false;
}

/**
 * Whether the broker refused a record as bigger than the topic's max.message.bytes (or its own
 * message.max.bytes): not retriable — the same record is refused again, whatever the wait.
 */
export function isMessageTooLargeError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { type?: string }).type === 'MESSAGE_TOO_LARGE') return true;
  }
  return false;
}

export async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RequesterError('dependency_unavailable', message)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
