import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { clientScoped } from '@requester/shared/contract';
import {
  type ConsumerHealth,
  isRetriableKafkaError,
  type KafkaClient,
  type KafkaConsumer,
  type KafkaRecord,
  withTimeout,
} from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import type { RedisClient } from '@requester/shared/redis';
import { traceparentHeader } from '@requester/shared/tracing';

const skipped = counter(
  'sync_skipped_results_total',
  'records of out the sync-gateway could not read (not a JSON result envelope, no requestId): skipped',
  ['reason'],
);

/**
 * Follows the `out` topic for the sync-gateway. Every instance reads every result (its own
 * consumer group, so instances never split partitions between them) and only what arrives after
 * it started: a gateway is a live view, not a replay. Offsets are never committed; the group
 * lives as long as the instance.
 */
export interface FollowOptions {
  kafka: KafkaClient;
  topic: string;
  logger: Logger;
  /**
   * Called with the result's id (see `resultIdOf`) and its raw JSON (a JSON object with `meta`;
   * anything else on `out` is skipped), and the record's `traceparent` header (the executor's
   * PRODUCER span) when it has one.
   */
  onResult(resultId: string, json: string, traceparent?: string): void;
  /**
   * When given, a keyed record goes here instead of `onResult`, unread: `key` is its requestId,
   * `idOf(json, key)` the id `onResult` would have been given (its JSON.parse), or undefined for a
   * record that is no result (skipped as `onResult` would skip it, when it is read). For a
   * consumer that reads most results for nobody (`Hub.offer`). Unkeyed records still go to `onResult`.
   */
  onUnread?(
    key: string,
    json: string,
    idOf: (json: string, key: string) => string | undefined,
    traceparent?: string,
  ): void;
  /** Bound on joining the group at start. */
  joinTimeoutMs?: number;
  /** KAFKA_SESSION_TIMEOUT (default: the adapter's). */
  sessionTimeoutMs?: number;
  /** Where the consumer's crashes are followed (for /readyz). */
  health?: ConsumerHealth;
}

export interface Following {
  groupId: string;
  stop(): Promise<void>;
}

/** One group per instance: host and pid for the operator, random bytes for uniqueness. */
export function instanceGroupId(): string {
  return `requester-sync-${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

export interface ReplyOptions {
  /** A connection of its own (`redisSubscriber`): it serves nothing else once subscribed. */
  subscriber: RedisClient;
  /** This gateway's `replyChannel`. */
  channel: string;
  logger: Logger;
  /** Called with the id (see `resultIdOf`) and the raw JSON of each result published to this gateway. */
  onResult(resultId: string, json: string): void;
}

/**
 * Follows this gateway's reply channel: the results of the sync requests its ingress stamped with
 * its id, published by the executors after `out` (O(its own callers), whatever the gateway count).
 * Resolves once Redis confirmed the subscription.
 */
export async function followReplies(options: ReplyOptions): Promise<Pick<Following, 'stop'>> {
  const { subscriber, channel, logger } = options;
  const onMessage = (from: Buffer, message: Buffer) => {
    if (from.toString() === channel) deliver({ key: null, value: message }, options);
  };
  subscriber.on('smessageBuffer', onMessage);
  try {
    await subscriber.ssubscribe(channel);
  } catch (err) {
    subscriber.off('smessageBuffer', onMessage);
    subscriber.disconnect();
    throw err;
  }
  logger.info({ channel }, 'following sync replies');
  return {
    stop: async () => {
      subscriber.off('smessageBuffer', onMessage);
      subscriber.disconnect();
    },
  };
}

/**
 * How long a fetch of `out` waits for FOLLOW_MIN_BYTES when results trickle in. Under load 64 KiB
 * of results took longer than 50 ms to come (~1,300 results/s), so the follower fetched 20 times a
 * second busy or idle, each fetch ~1 ms of CPU on a 2-core box: 200 ms, and a long-poll of a
 * trickle is answered up to 200 ms late (one that does not follow `out` re-reads every second).
 */
const FOLLOW_WAIT_MS = 200;
const FOLLOW_MIN_BYTES = 64 * 1024;

/**
 * Resolves once the consumer is assigned every partition and positioned at the end offsets read
 * before it joined: a result produced after this resolves is always seen (a sync caller that
 * starts right after the role reports started cannot miss its result).
 */
export async function followResults(options: FollowOptions): Promise<Following> {
  const { kafka, topic, logger } = options;
  const ends = await endOffsets(kafka, topic);
  const groupId = instanceGroupId();
  const idOf = unreadIdOf(options);
  // Every result on `out` passes here, but sync callers are answered through their gateway's
  // channel first: this copy serves long-polls and late callers, for whom a few ms more do not
  // matter. So fetches wait for some bytes (or FOLLOW_WAIT_MS): under load, fewer and larger
  // batches. The wait is short anyway: disconnecting waits for the fetch in flight.
  const consumer = kafka.consumer({
    groupId,
    maxWaitMs: FOLLOW_WAIT_MS,
    minBytes: FOLLOW_MIN_BYTES,
    ...(options.sessionTimeoutMs === undefined ? {} : { sessionTimeoutMs: options.sessionTimeoutMs }),
  });
  const unwatch = options.health?.watch(consumer, groupId);
  const joined = firstJoin(consumer, topic, ends);
  try {
    await consumer.start({
      topics: [topic],
      fromBeginning: false,
      commit: 'never',
      onBatch: async ({ records }) => {
        for (const record of records) deliver(record, options, idOf);
      },
    });
    await withTimeout(joined, options.joinTimeoutMs ?? 30_000, `joining consumer group ${groupId} timed out`);
  } catch (err) {
    unwatch?.();
    await consumer.stop().catch(() => {});
    throw err;
  }
  logger.info({ groupId, topic }, 'following results');
  return {
    groupId,
    stop: async () => {
      unwatch?.();
      await consumer.stop();
    },
  };
}

/**
 * The high watermark of each partition, read before joining so nothing after it is skipped.
 * Retried on retriable errors: right after a topic is created the broker may still answer
 * NOT_LEADER for a moment, and that must not fail the role's start.
 */
async function endOffsets(kafka: KafkaClient, topic: string, attempts = 20): Promise<Map<number, string>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        const offsets = await admin.topicOffsets(topic);
        return new Map(offsets.map((p) => [p.partition, p.high]));
      } catch (err) {
        if (attempt >= attempts || !isRetriableKafkaError(err)) throw err;
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * attempt, 1_000)));
      }
    }
  } finally {
    await admin.disconnect();
  }
}

/**
 * Seeks every assigned partition to the end offsets read earlier, from inside the join event:
 * a consumer may resolve "latest" lazily at its first fetch (kafkajs does), and a result written in
 * between would be lost to a caller already waiting for it.
 */
function firstJoin(consumer: KafkaConsumer, topic: string, ends: Map<number, string>): Promise<void> {
  return new Promise((resolve) => {
    const off = consumer.onAssigned((assignment) => {
      off();
      for (const partition of assignment[topic] ?? []) {
        const offset = ends.get(partition);
        if (offset !== undefined) consumer.seek(topic, partition, offset);
      }
      resolve();
    });
  });
}

type OutMessage = Pick<KafkaRecord, 'key' | 'value'> & Partial<Pick<KafkaRecord, 'headers'>>;

/**
 * `out` is keyed by requestId; an unkeyed record falls back to its `meta.requestId`. A record that
 * is not a JSON object with a `meta` object is no result anyone can be answered with: it is skipped
 * (logged and counted in `sync_skipped_results_total`), so the caller still gets the real result when
 * it comes, and nothing on `out` can stop the consumer.
 */
function deliver(
  message: OutMessage,
  options: Pick<FollowOptions, 'onResult' | 'onUnread' | 'logger'>,
  idOf?: (json: string, key: string) => string | undefined,
): void {
  try {
    const key = idOf && message.value ? message.key?.toString('utf8') : undefined;
    if (key && idOf && options.onUnread) {
      options.onUnread(key, message.value?.toString('utf8') ?? '', idOf, traceparentHeader(message.headers));
      return;
    }
    const json = message.value?.toString('utf8') ?? '';
    const result = readResult(json);
    const requestId = result && (message.key?.toString('utf8') || requestIdOf(result));
    if (result && requestId)
      options.onResult(resultIdOf(result, requestId), json, traceparentHeader(message.headers));
    else skip(message, options, !result ? (message.value ? 'unreadable' : 'empty') : 'no_request_id');
  } catch (err) {
    options.logger.error({ err }, 'a result of out could not be handed over: skipped');
    skipped.inc({ reason: 'error' });
  }
}

/** The `idOf` of `onUnread`: the id `onResult` would have been given, after the same checks. */
function unreadIdOf(
  options: Pick<FollowOptions, 'logger'>,
): (json: string, key: string) => string | undefined {
  return (json, key) => {
    const result = readResult(json);
    if (result) return resultIdOf(result, key);
    skip({ key: Buffer.from(key), value: null }, options, 'unreadable');
    return undefined;
  };
}

function skip(message: OutMessage, options: Pick<FollowOptions, 'logger'>, reason: string): void {
  skipped.inc({ reason });
  options.logger.warn(
    { key: message.key?.toString('utf8').slice(0, 256), reason },
    'unreadable record on out: skipped',
  );
}

function readResult(json: string): { meta: Record<string, unknown> } | undefined {
  try {
    const value = JSON.parse(json) as { meta?: unknown } | null;
    const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
    return isObject(value) && isObject(value?.meta)
      ? (value as { meta: Record<string, unknown> })
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What a gateway keys a result by: its requestId in the namespace of its `meta.client`, the way
 * callers look it up (`clientScoped(their client, requestId)`): two clients' results of one
 * requestId are two results, and a caller meets only its own.
 */
export function resultIdOf(result: { meta: Record<string, unknown> }, requestId: string): string {
  const client = result.meta.client;
  return clientScoped(typeof client === 'string' ? client : undefined, requestId);
}

function requestIdOf(result: { meta: Record<string, unknown> }): string | undefined {
  const id = result.meta.requestId;
  return typeof id === 'string' && id !== '' ? id : undefined;
}
