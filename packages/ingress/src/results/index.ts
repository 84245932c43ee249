import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { type Consumer, createConsumer, type createKafka, type Logger, withTimeout } from '@requester/shared';

type Kafka = ReturnType<typeof createKafka>;

/**
 * Follows the `out` topic for the sync-gateway. Every instance reads every result (its own
 * consumer group, so instances never split partitions between them) and only what arrives after
 * it started: a gateway is a live view, not a replay. Offsets are never committed; the group
 * lives as long as the instance.
 */
export interface FollowOptions {
  kafka: Kafka;
  topic: string;
  logger: Logger;
  /** Called with the requestId and the raw JSON of each result (parsed only when someone asks). */
  onResult(requestId: string, json: string): void;
  /** Bound on joining the group at start. */
  joinTimeoutMs?: number;
  /** KAFKA_SESSION_TIMEOUT (default: the adapter's). */
  sessionTimeoutMs?: number;
}

export interface Following {
  groupId: string;
  stop(): Promise<void>;
}

/** One group per instance: host and pid for the operator, random bytes for uniqueness. */
export function instanceGroupId(): string {
  return `requester-sync-${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * Resolves once the consumer is assigned every partition and positioned at the end offsets read
 * before it joined: a result produced after this resolves is always seen (a sync caller that
 * starts right after the role reports started cannot miss its result).
 */
export async function followResults(options: FollowOptions): Promise<Following> {
  const { kafka, topic, logger } = options;
  const ends = await endOffsets(kafka, topic);
  const groupId = instanceGroupId();
  // A short fetch wait: disconnecting waits for the fetch in flight, and shutdown should be quick.
  const consumer = createConsumer(kafka, {
    groupId,
    maxWaitTimeInMs: 1_000,
    ...(options.sessionTimeoutMs === undefined ? {} : { sessionTimeout: options.sessionTimeoutMs }),
  });
  const joined = firstJoin(consumer, topic, ends);
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: false });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => deliver(message, options),
    });
    await withTimeout(joined, options.joinTimeoutMs ?? 30_000, `joining consumer group ${groupId} timed out`);
  } catch (err) {
    await consumer.disconnect().catch(() => {});
    throw err;
  }
  logger.info({ groupId, topic }, 'following results');
  return { groupId, stop: () => consumer.disconnect() };
}

/**
 * The high watermark of each partition, read before joining so nothing after it is skipped.
 * Retried on retriable errors: right after a topic is created the broker may still answer
 * NOT_LEADER for a moment, and that must not fail the role's start.
 */
async function endOffsets(kafka: Kafka, topic: string, attempts = 20): Promise<Map<number, string>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        const offsets = await admin.fetchTopicOffsets(topic);
        return new Map(offsets.map((p) => [p.partition, p.high]));
      } catch (err) {
        if (attempt >= attempts || !(err as { retriable?: boolean }).retriable) throw err;
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * attempt, 1_000)));
      }
    }
  } finally {
    await admin.disconnect();
  }
}

/**
 * Seeks every assigned partition to the end offsets read earlier, from inside the join event:
 * kafkajs would otherwise resolve "latest" lazily at its first fetch, and a result written in
 * between would be lost to a caller already waiting for it.
 */
function firstJoin(consumer: Consumer, topic: string, ends: Map<number, string>): Promise<void> {
  return new Promise((resolve) => {
    const off = consumer.on(consumer.events.GROUP_JOIN, (event) => {
      off();
      const assigned: number[] = event.payload.memberAssignment[topic] ?? [];
      for (const partition of assigned) {
        const offset = ends.get(partition);
        if (offset !== undefined) consumer.seek({ topic, partition, offset });
      }
      resolve();
    });
  });
}

interface OutMessage {
  key: Buffer | null;
  value: Buffer | null;
}

/** `out` is keyed by requestId; an unkeyed record falls back to its `meta.requestId`. */
function deliver(message: OutMessage, options: FollowOptions): void {
  if (!message.value) return;
  const json = message.value.toString('utf8');
  const requestId = message.key?.toString('utf8') || requestIdOf(json);
  if (requestId) options.onResult(requestId, json);
  else options.logger.debug('result without a requestId: nobody can wait for it');
}

function requestIdOf(json: string): string | undefined {
  try {
    const id = (JSON.parse(json) as { meta?: { requestId?: unknown } }).meta?.requestId;
    return typeof id === 'string' && id !== '' ? id : undefined;
  } catch {
    return undefined;
  }
}
