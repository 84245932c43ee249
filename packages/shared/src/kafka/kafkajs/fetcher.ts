import { createRequire } from 'node:module';
import { type IHeaders, type logCreator as LogCreator, Partitioners } from 'kafkajs';
import { LRUCache } from 'lru-cache';
import { RequesterError } from '../../errors/index.ts';
import type { Logger } from '../../log/index.ts';
import { BIG_RECORD_BYTES, withTimeout } from '../batching.ts';
import type { KafkaSecurity } from '../security.ts';
import {
  type FetchedRecord,
  type Fetcher,
  type FetcherCacheStats,
  type FetcherOptions,
  type FetchOutcome,
  type KafkaRef,
  RecordUnavailableError,
} from '../types.ts';
import { brokerList, kafkajsSecurity, kafkaLogCreator } from './options.ts';

/**
 * Reads records of a topic by offset (docs/architecture.md §9). kafkajs has no public API for it and the
 * consumer-group-plus-seek route costs a group join per read, so this module drives kafkajs's
 * low-level cluster directly: leader lookup from metadata, then one Fetch request per broker
 * carrying one range per topic-partition. Everything kafkajs-internal stays in this file.
 */

// kafkajs has no `exports` map, so its internals are reachable by path; they are CommonJS.
const require = createRequire(import.meta.url);
const Cluster = require('kafkajs/src/cluster') as new (options: Record<string, unknown>) => LowLevelCluster;
const socketFactory = require('kafkajs/src/network/socketFactory') as () => unknown;
const kafkaLoggers = require('kafkajs/src/loggers') as {
  createLogger(options: { level: number; logCreator: LogCreator }): unknown;
  LEVELS: Record<'NOTHING' | 'ERROR' | 'WARN' | 'INFO' | 'DEBUG', number>;
};
const READ_COMMITTED = 1;

interface RawRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: IHeaders;
  timestamp: string;
  isControlRecord: boolean;
}

interface FetchResponse {
  responses: Array<{ topicName: string; partitions: Array<{ partition: number; messages: RawRecord[] }> }>;
}

interface LowLevelBroker {
  fetch(request: {
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    isolationLevel: number;
    topics: Array<{
      topic: string;
      partitions: Array<{ partition: number; fetchOffset: string; maxBytes: number }>;
    }>;
  }): Promise<FetchResponse>;
}

interface LowLevelCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  refreshMetadata(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  findTopicPartitionMetadata(topic: string): Array<{ partitionId: number; leader: number | null }>;
  findBroker(query: { nodeId: string }): Promise<LowLevelBroker>;
  fetchTopicsOffset(
    topics: Array<{
      topic: string;
      partitions: Array<{ partition: number }>;
      fromBeginning?: boolean;
      fromTimestamp?: number;
    }>,
  ): Promise<Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }>>;
}

export interface FetcherSettings extends FetcherOptions {
  brokers: string;
  clientId: string;
  logger: Logger;
  /** TLS and SASL towards the brokers (`kafkaSecurityFrom(config)`). */
  security?: KafkaSecurity;
}

export function createFetcher(settings: FetcherSettings): Fetcher {
  return new KafkaFetcher(settings);
}

const DEFAULTS = {
  connections: 2,
  maxWaitMs: 100,
  partitionMaxBytes: 1 << 20,
  requestMaxBytes: 16 << 20,
  timeoutMs: 10_000,
  cacheBytes: 32 << 20,
};

/** Pending offsets of one topic-partition, ascending. */
interface PartitionWant {
  topic: string;
  partition: number;
  offsets: bigint[];
}

class KafkaFetcher implements Fetcher {
  private readonly options: typeof DEFAULTS;
  private readonly log: Logger;
  private readonly clusters: LowLevelCluster[];
  private readonly connecting: Array<Promise<void> | undefined>;
  private readonly cache: LRUCache<string, FetchedRecord> | undefined;
  /** Bytes per record last seen in each topic's responses: what sizes the next fetches. */
  private readonly recordBytes = new Map<string, number>();
  /** Neighbours in the cache that no fetch has asked for yet (for cacheStats). */
  private readonly unread = new WeakSet<FetchedRecord>();
  private readonly stats: FetcherCacheStats = { hits: 0, misses: 0, neighbours: 0, evictedUnread: 0 };
  private next = 0;

  constructor(settings: FetcherSettings) {
    this.options = { ...DEFAULTS, ...definedOnly(settings) };
    this.log = settings.logger.child({ component: 'kafka-fetcher' });
    this.cache = recordCache(this.options.cacheBytes, (record, reason) => {
      if (reason === 'evict' && this.unread.has(record)) this.stats.evictedUnread++;
    });
    this.clusters = Array.from({ length: this.options.connections }, () => this.newCluster(settings));
    this.connecting = this.clusters.map(() => undefined);
  }

  private newCluster(settings: FetcherSettings): LowLevelCluster {
    return new Cluster({
      logger: kafkaLoggers.createLogger({
        level: kafkaLoggers.LEVELS.WARN,
        logCreator: kafkaLogCreator(this.log),
      }),
      socketFactory: socketFactory(),
      brokers: brokerList(settings.brokers),
      ...kafkajsSecurity(settings.security),
      clientId: `${settings.clientId}-fetcher`,
      connectionTimeout: 3_000,
      requestTimeout: this.options.timeoutMs,
      enforceRequestTimeout: true,
      metadataMaxAge: 300_000,
      retry: { initialRetryTime: 100, retries: 3, maxRetryTime: 1_000 },
      allowAutoTopicCreation: false,
      maxInFlightRequests: null,
      isolationLevel: READ_COMMITTED,
    });
  }

  /** Round-robin over the pool; each cluster connects on first use (and again after a failure). */
  private async cluster(): Promise<LowLevelCluster> {
    const index = this.next++ % this.clusters.length;
    const cluster = this.clusters[index]!;
    this.connecting[index] ??= cluster.connect().catch((err: unknown) => {
      this.connecting[index] = undefined;
      throw err;
    });
    await this.connecting[index];
    return cluster;
  }

  async fetch(ref: KafkaRef): Promise<FetchedRecord> {
    const [outcome] = await this.fetchMany([ref]);
    if (!outcome) throw new RequesterError('internal', 'fetchMany returned nothing');
    if (!outcome.ok) throw outcome.error;
    return outcome.record;
  }

  async fetchMany(refs: readonly KafkaRef[]): Promise<FetchOutcome[]> {
    const found = new Map<string, FetchOutcome>();
    const wants = new Map<string, PartitionWant>();
    for (const ref of refs) {
      const cached = this.cache?.get(refKey(ref));
      if (cached) {
        this.stats.hits++;
        this.unread.delete(cached);
        found.set(refKey(ref), { ok: true, record: cached });
      } else addWant(wants, ref);
    }
    for (const want of wants.values()) this.stats.misses += want.offsets.length;
    if (wants.size > 0) await this.resolve(wants, found);
    return refs.map(
      (ref) =>
        found.get(refKey(ref)) ?? {
          ok: false,
          error: new RequesterError('internal', `fetcher lost ${refKey(ref)}`),
        },
    );
  }

  cachedBytes(): number {
    return this.cache?.calculatedSize ?? 0;
  }

  cacheStats(): FetcherCacheStats {
    return { ...this.stats };
  }

  /**
   * The task journal's lookup. A key lives in one partition — the one the producer's default
   * partitioner (murmur2, as Kafka's Java client) gives it — and ListOffsets by timestamp says
   * where `sinceMs` begins in it; so one partition is read, forward, in fetches of
   * `scanMaxBytes`, keeping the records of the key. Records are copies (see ownedRecord).
   */
  async readKey(topic: string, key: string, sinceMs: number): Promise<FetchedRecord[]> {
    const deadline = Date.now() + this.options.timeoutMs;
    const left = () => Math.max(1, deadline - Date.now());
    const cluster = await withTimeout(this.cluster(), left(), 'Kafka fetcher: connect timed out');
    try {
      await cluster.addMultipleTargetTopics([topic]);
    } catch (err) {
      if ((err as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION')
        throw new RequesterError('not_found', `topic ${topic} does not exist`);
      throw err;
    }
    const partition = partitionOfKey(key, cluster.findTopicPartitionMetadata(topic).length);
    const offsetAt = async (spec: { fromTimestamp: number } | { fromBeginning: false }) => {
      const [answer] = await cluster.fetchTopicsOffset([{ topic, partitions: [{ partition }], ...spec }]);
      return BigInt(answer?.partitions.find((p) => p.partition === partition)?.offset ?? '-1');
    };
    const [start, end] = await withTimeout(
      Promise.all([offsetAt({ fromTimestamp: sinceMs }), offsetAt({ fromBeginning: false })]),
      left(),
      'Kafka fetcher: offsets not answered in time',
    );
    const wanted = Buffer.from(key);
    const found: FetchedRecord[] = [];
    for (let offset = start; offset >= 0n && offset < end; ) {
      const messages = await withTimeout(
        this.fetchFrom(cluster, topic, partition, offset),
        left(),
        `Kafka fetcher: ${topic}/${partition} not read within ${this.options.timeoutMs} ms`,
      );
      let next = offset;
      for (const raw of messages) {
        const at = BigInt(raw.offset);
        if (at < offset || at >= end) continue;
        next = at + 1n;
        if (!raw.isControlRecord && raw.key?.equals(wanted)) found.push(ownedRecord(topic, partition, raw));
      }
      if (next === offset) break; // only transaction markers remain before the end
      offset = next;
    }
    return found;
  }

  private async fetchFrom(
    cluster: LowLevelCluster,
    topic: string,
    partition: number,
    offset: bigint,
  ): Promise<RawRecord[]> {
    const leader = cluster.findTopicPartitionMetadata(topic).find((p) => p.partitionId === partition)?.leader;
    if (leader === null || leader === undefined)
      throw new RequesterError('dependency_unavailable', `no leader known for ${topic}/${partition}`);
    const broker = await cluster.findBroker({ nodeId: String(leader) });
    const maxBytes = this.options.requestMaxBytes;
    const response = await broker.fetch({
      maxWaitTime: 0,
      minBytes: 1,
      maxBytes,
      isolationLevel: READ_COMMITTED,
      topics: [{ topic, partitions: [{ partition, fetchOffset: offset.toString(), maxBytes }] }],
    });
    return response.responses[0]?.partitions[0]?.messages ?? [];
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.clusters.map((c) => c.disconnect()));
    this.cache?.clear();
  }

  /**
   * Rounds of one Fetch per broker until every wanted offset is resolved or the time is up. A
   * round asks each partition from its smallest pending offset; a response may stop short of the
   * largest (bytes limit), so the next round continues where it stopped.
   */
  private async resolve(wants: Map<string, PartitionWant>, found: Map<string, FetchOutcome>): Promise<void> {
    const deadline = Date.now() + this.options.timeoutMs;
    const settle = (want: PartitionWant, offset: bigint, outcome: FetchOutcome) => {
      found.set(refKey({ topic: want.topic, partition: want.partition, offset: offset.toString() }), outcome);
    };
    let failure: unknown;
    try {
      const cluster = await withTimeout(
        this.cluster(),
        this.options.timeoutMs,
        'Kafka fetcher: connect timed out',
      );
      await this.loadTopics(cluster, wants, settle);
      for (let round = 0; wants.size > 0 && Date.now() < deadline; round++) {
        if (round > 0 && failure !== undefined) await sleep(Math.min(50 * 2 ** Math.min(round, 5), 1_000));
        failure = undefined;
        try {
          await withTimeout(
            this.round(cluster, wants, settle),
            Math.max(1, deadline - Date.now()),
            'Kafka fetcher: fetch timed out',
          );
        } catch (err) {
          failure = err;
          await this.recover(cluster, err, wants, settle);
        }
      }
    } catch (err) {
      failure = err;
    }
    for (const want of wants.values()) {
      const error = new RequesterError(
        'dependency_unavailable',
        `Kafka fetcher: ${want.topic}/${want.partition} not read within ${this.options.timeoutMs} ms${
          failure instanceof Error ? `: ${failure.message}` : ''
        }`,
        { cause: failure },
      );
      for (const offset of want.offsets) settle(want, offset, { ok: false, error });
    }
  }

  /** Metadata for the wanted topics; the refs of a topic that does not exist are `not_found`. */
  private async loadTopics(
    cluster: LowLevelCluster,
    wants: Map<string, PartitionWant>,
    settle: Settle,
  ): Promise<void> {
    const topics = [...new Set([...wants.values()].map((w) => w.topic))];
    const missing = await Promise.all(
      topics.map(async (topic) => {
        try {
          await cluster.addMultipleTargetTopics([topic]);
          return undefined;
        } catch (err) {
          if ((err as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION') return topic;
          throw err;
        }
      }),
    );
    for (const [key, want] of wants) {
      const known =
        !missing.includes(want.topic) &&
        cluster.findTopicPartitionMetadata(want.topic).some((p) => p.partitionId === want.partition);
      if (known) continue;
      wants.delete(key);
      for (const offset of want.offsets)
        settle(want, offset, unavailable('not_found', want, offset, 'no such topic or partition'));
    }
  }

  /** One Fetch per leader broker, in parallel; then the records are matched against the wants. */
  private async round(
    cluster: LowLevelCluster,
    wants: Map<string, PartitionWant>,
    settle: Settle,
  ): Promise<void> {
    const byLeader = new Map<number, PartitionWant[]>();
    for (const want of wants.values()) {
      const leader = cluster
        .findTopicPartitionMetadata(want.topic)
        .find((p) => p.partitionId === want.partition)?.leader;
      if (leader === null || leader === undefined) throw new LeaderUnknown(want);
      byLeader.set(leader, [...(byLeader.get(leader) ?? []), want]);
    }
    await Promise.all(
      [...byLeader].flatMap(([leader, group]) => {
        // A partition's wants in ranges of near offsets; request k carries every partition's k-th.
        const ranges = group.map((want) => ({ want, ranges: this.ranges(want) }));
        const requests = Math.max(...ranges.map((r) => r.ranges.length));
        return Array.from({ length: requests }, async (_, k) => {
          const asked = ranges.flatMap(({ want, ranges }) => (ranges[k] ? [{ want, ...ranges[k] }] : []));
          const broker = await cluster.findBroker({ nodeId: String(leader) });
          const response = await broker.fetch({
            maxWaitTime: this.options.maxWaitMs,
            minBytes: 1,
            maxBytes: this.options.requestMaxBytes,
            isolationLevel: READ_COMMITTED,
            topics: groupByTopic(asked.map((a) => a.want)).map(([topic]) => ({
              topic,
              partitions: asked
                .filter((a) => a.want.topic === topic)
                .map((a) => ({
                  partition: a.want.partition,
                  fetchOffset: a.from.toString(),
                  maxBytes: a.bytes,
                })),
            })),
          });
          const from = new Map(asked.map((a) => [tpKey(a.want.topic, a.want.partition), a.from]));
          await this.absorb(cluster, response, wants, settle, from);
        });
      }),
    );
  }

  /**
   * A partition's pending offsets as ranges to fetch at once (at most MAX_RANGES; the rest wait
   * for the next round): offsets closer than READ_AHEAD_BYTES at the topic's record size last seen
   * share a range. A lease batch's offsets are scattered, and one range from the smallest to the
   * largest would receive every record between them; a range per cluster receives its records
   * (and the rest of their batches, which the broker sends whole).
   */
  private ranges(want: PartitionWant): Array<{ from: bigint; bytes: number }> {
    const perRecord = this.recordBytes.get(want.topic);
    if (perRecord === undefined) return [{ from: want.offsets[0]!, bytes: this.rangeBytes(want.offsets) }];
    const gap = BigInt(Math.max(1, Math.floor(READ_AHEAD_BYTES / perRecord)));
    const ranges: Array<{ from: bigint; bytes: number }> = [];
    let start = 0;
    for (let i = 1; i <= want.offsets.length && ranges.length < MAX_RANGES; i++) {
      const offset = want.offsets[i];
      if (offset !== undefined && offset - want.offsets[i - 1]! <= gap) continue;
      const run = want.offsets.slice(start, i);
      ranges.push({ from: run[0]!, bytes: this.rangeBytes(run, perRecord) });
      start = i;
    }
    return ranges;
  }

  /**
   * Bytes to ask of a range: enough for the span of its wanted offsets at the topic's record
   * size last seen, at most `partitionMaxBytes` (all of it while the size is unknown). Small
   * records get at least READ_AHEAD_BYTES (their neighbours are cheap and cached). Big ones
   * (BIG_RECORD_BYTES) get the span and a quarter more, no read-ahead: the producer keeps their
   * batches small (PARTITION_BATCH_BYTES), and the next records of a partition are mostly wanted
   * by lease batches far off (a lease takes a shard's tasks, scattered over the whole backlog), so
   * read-ahead records were received, cached and evicted unread. The quarter covers what the
   * estimate leaves out (batch headers, record headers): the broker holds to the bytes asked for
   * every partition of a response but the first, and a batch cut short returns no record at all.
   * Wants spread over a partition take a round each whatever is asked.
   */
  private rangeBytes(offsets: bigint[], perRecord?: number): number {
    const max = this.options.partitionMaxBytes;
    if (perRecord === undefined) return max;
    const span = Number(offsets.at(-1)! - offsets[0]!) + 1;
    if (perRecord >= BIG_RECORD_BYTES) return Math.min(max, Math.ceil(perRecord * span * BIG_RECORD_MARGIN));
    return Math.min(max, Math.max(READ_AHEAD_BYTES, Math.ceil(perRecord * span)));
  }

  private learnRecordBytes(topic: string, messages: RawRecord[]): void {
    if (messages.length === 0) return;
    let bytes = 0;
    for (const raw of messages)
      bytes += (raw.value?.length ?? 0) + (raw.key?.length ?? 0) + RECORD_FRAMING_BYTES;
    // Only as many topics as the process reads; a bound all the same (topics made per test run).
    if (this.recordBytes.size >= 10_000 && !this.recordBytes.has(topic)) this.recordBytes.clear();
    this.recordBytes.set(topic, bytes / messages.length);
  }

  /**
   * Matches fetched records against the wants. The broker returns whole batches, so records
   * below the asked offset come too; control records (transaction markers) are skipped. A
   * wanted offset at or below the last returned record that did not come back holds no data
   * record (a control record or a compacted gap). A partition that returned nothing at or after
   * its asked offset is checked against its log bounds (expired below the start, missing past the end).
   * The cache gets copies (see ownedRecord) of the records of the response it does not hold yet:
   * the wanted ones, which are also what is answered; every big one (BIG_RECORD_BYTES), those
   * below the asked offset included, which the next lease batches mostly want (a lease takes
   * offsets scattered over the backlog; keeping only a little read-ahead, a 64 KiB record was
   * received ~9 times); of small ones, READ_AHEAD_BYTES after the asked offset (hundreds of
   * records a response: each one's key and lookup would cost more than its later hit saves).
   */
  private async absorb(
    cluster: LowLevelCluster,
    response: FetchResponse,
    wants: Map<string, PartitionWant>,
    settle: Settle,
    asked: Map<string, bigint>,
  ): Promise<void> {
    const stalled: PartitionWant[] = [];
    for (const { topicName, partitions } of response.responses) {
      for (const { partition, messages } of partitions) {
        const key = tpKey(topicName, partition);
        const want = wants.get(key);
        if (!want) continue;
        const from = asked.get(key) ?? want.offsets[0]!;
        this.learnRecordBytes(topicName, messages);
        const wanted = new Set(want.offsets);
        let last = -1n;
        let readAhead = READ_AHEAD_BYTES;
        const byOffset = new Map<bigint, FetchedRecord>();
        for (const raw of messages) {
          const offset = BigInt(raw.offset);
          if (offset >= from && offset > last) last = offset;
          if (raw.isControlRecord) continue;
          const isWanted = offset >= from && wanted.has(offset);
          const charge = chargedBytes(raw);
          // Small neighbours: a key and a lookup each cost more than they save past 256 KiB.
          const big = charge >= BIG_RECORD_BYTES;
          const neighbour = !isWanted && (big || (offset >= from && charge <= readAhead));
          if (neighbour && !big) readAhead -= charge;
          const record = isWanted || neighbour ? this.keep(topicName, partition, raw, isWanted) : undefined;
          if (isWanted) byOffset.set(offset, record ?? toRecord(topicName, partition, raw));
        }
        if (last < from) {
          stalled.push(want);
          continue;
        }
        // Offsets below `from` are another range's (of the same round) to settle.
        want.offsets = want.offsets.filter((offset) => {
          if (offset > last || offset < from) return true;
          const record = byOffset.get(offset);
          settle(
            want,
            offset,
            record
              ? { ok: true, record }
              : unavailable('not_found', want, offset, 'no data record at this offset'),
          );
          return false;
        });
        if (want.offsets.length === 0) wants.delete(key);
      }
    }
    if (stalled.length > 0) await this.checkBounds(cluster, stalled, wants, settle);
  }

  /**
   * Puts a copy of a received record in the cache unless it is there already (or too big for it);
   * returns the copy, which a wanted record is answered with.
   */
  private keep(
    topic: string,
    partition: number,
    raw: RawRecord,
    isWanted: boolean,
  ): FetchedRecord | undefined {
    const cache = this.cache;
    if (!cache || chargedBytes(raw) > this.options.cacheBytes) return undefined;
    const key = refKey({ topic, partition, offset: raw.offset });
    // A neighbour held already is left where it is in the LRU order (it may be one answered before).
    const held = isWanted ? cache.get(key) : cache.peek(key);
    if (held) return held;
    const record = ownedRecord(topic, partition, raw);
    cache.set(key, record);
    if (!isWanted) {
      this.stats.neighbours++;
      this.unread.add(record);
    }
    return record;
  }

  /**
   * Settles the wanted offsets outside a partition's log: below the log start → expired,
   * at or past the end (last stable offset) → missing. Offsets inside stay pending.
   */
  private async checkBounds(
    cluster: LowLevelCluster,
    group: PartitionWant[],
    wants: Map<string, PartitionWant>,
    settle: Settle,
  ): Promise<void> {
    const query = (fromBeginning: boolean) =>
      cluster.fetchTopicsOffset(
        groupByTopic(group).map(([topic, list]) => ({
          topic,
          fromBeginning,
          partitions: list.map((w) => ({ partition: w.partition })),
        })),
      );
    const [starts, ends] = await Promise.all([query(true), query(false)]);
    const bound = (answer: typeof starts, want: PartitionWant) =>
      answer.find((t) => t.topic === want.topic)?.partitions.find((p) => p.partition === want.partition)
        ?.offset;
    for (const want of group) {
      const start = BigInt(bound(starts, want) ?? '0');
      const end = BigInt(bound(ends, want) ?? '-1');
      want.offsets = want.offsets.filter((offset) => {
        if (offset < start) {
          settle(
            want,
            offset,
            unavailable('record_expired', want, offset, `record expired (log starts at ${start})`),
          );
          return false;
        }
        if (end >= 0n && offset >= end) {
          settle(want, offset, unavailable('not_found', want, offset, `no record yet (log ends at ${end})`));
          return false;
        }
        return true;
      });
      if (want.offsets.length === 0) wants.delete(tpKey(want.topic, want.partition));
    }
    this.log.debug({ partitions: group.length }, 'checked log bounds of stalled partitions');
  }

  /** After a failed round: stale leadership → refresh metadata; out of range → check the bounds. */
  private async recover(
    cluster: LowLevelCluster,
    err: unknown,
    wants: Map<string, PartitionWant>,
    settle: Settle,
  ): Promise<void> {
    const e = err as { name?: string; type?: string; topic?: string; partition?: number };
    try {
      if (e.name === 'KafkaJSOffsetOutOfRange' && e.topic !== undefined && e.partition !== undefined) {
        // The broker fails the whole response for the first out-of-range partition; the others
        // are simply asked again next round.
        const want = wants.get(tpKey(e.topic, e.partition));
        if (want) await this.checkBounds(cluster, [want], wants, settle);
        return;
      }
      this.log.warn({ err }, 'Kafka fetch failed; refreshing metadata and retrying');
      await cluster.refreshMetadata();
    } catch (inner) {
      this.log.warn({ err: inner }, 'Kafka fetcher could not recover yet');
    }
  }
}

type Settle = (want: PartitionWant, offset: bigint, outcome: FetchOutcome) => void;

class LeaderUnknown extends Error {
  constructor(want: PartitionWant) {
    super(`no leader known for ${want.topic}/${want.partition}`);
    this.name = 'LeaderUnknown';
  }
}

function unavailable(
  code: 'record_expired' | 'not_found',
  want: PartitionWant,
  offset: bigint,
  message: string,
): FetchOutcome {
  const ref = { topic: want.topic, partition: want.partition, offset: offset.toString() };
  return { ok: false, error: new RecordUnavailableError(code, ref, message) };
}

function addWant(wants: Map<string, PartitionWant>, ref: KafkaRef): void {
  const key = tpKey(ref.topic, ref.partition);
  let want = wants.get(key);
  if (!want) {
    want = { topic: ref.topic, partition: ref.partition, offsets: [] };
    wants.set(key, want);
  }
  const offset = BigInt(ref.offset);
  if (!want.offsets.includes(offset)) {
    want.offsets.push(offset);
    want.offsets.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }
}

function groupByTopic(wants: PartitionWant[]): Array<[string, PartitionWant[]]> {
  const byTopic = new Map<string, PartitionWant[]>();
  for (const want of wants) byTopic.set(want.topic, [...(byTopic.get(want.topic) ?? []), want]);
  return [...byTopic];
}

function toRecord(topic: string, partition: number, raw: RawRecord): FetchedRecord {
  return {
    ref: { topic, partition, offset: raw.offset },
    key: raw.key,
    value: raw.value,
    headers: raw.headers,
    timestamp: raw.timestamp,
  };
}

/**
 * A record with its own copies of key and value. kafkajs hands out views into the buffer of the
 * whole fetch response (up to `requestMaxBytes`): a kept view would keep that whole buffer alive,
 * and the cache's byte bound would mean nothing. Unpooled: a pooled copy would share (and keep)
 * an 8 KiB slab.
 */
function ownedRecord(topic: string, partition: number, raw: RawRecord): FetchedRecord {
  return { ...toRecord(topic, partition, raw), key: ownCopy(raw.key), value: ownCopy(raw.value) };
}

function ownCopy(view: Buffer | null): Buffer | null {
  if (!view) return null;
  const copy = Buffer.allocUnsafeSlow(view.length);
  view.copy(copy);
  return copy;
}

const defaultPartitioner = Partitioners.DefaultPartitioner();

/** The partition the adapter's producer (kafkajs's default partitioner, murmur2) writes `key` to. */
export function partitionOfKey(key: string | Buffer, partitions: number): number {
  const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({
    partitionId,
    leader: 0,
    replicas: [0],
    isr: [0],
    partitionErrorCode: 0,
  }));
  return defaultPartitioner({ topic: '', partitionMetadata, message: { key, value: null } });
}

function tpKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

function refKey(ref: KafkaRef): string {
  return `${ref.topic}\u0000${ref.partition}\u0000${BigInt(ref.offset)}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Recently fetched records, least recently used out first, bounded by their bytes: a record is
 * charged its key and value plus RECORD_OVERHEAD_BYTES (ref, headers, the LRU's slots). A record
 * bigger than the whole bound is not kept.
 */
function recordCache(
  maxBytes: number,
  dispose: (record: FetchedRecord, reason: LRUCache.DisposeReason) => void,
): LRUCache<string, FetchedRecord> | undefined {
  if (maxBytes <= 0) return undefined;
  return new LRUCache<string, FetchedRecord>({
    maxSize: maxBytes,
    sizeCalculation: chargedBytes,
    dispose: (record, _key, reason) => dispose(record, reason),
  });
}

const RECORD_OVERHEAD_BYTES = 256;

function chargedBytes(record: { key: Buffer | null; value: Buffer | null }): number {
  return (record.value?.length ?? 0) + (record.key?.length ?? 0) + RECORD_OVERHEAD_BYTES;
}

/**
 * The least a range asks of a partition (sized by its wants, see rangeBytes), and the gap between
 * wanted offsets below which they share a range (see ranges).
 */
const READ_AHEAD_BYTES = 256 * 1024;

/** A range of big records asks this much more than its records' estimated bytes (see rangeBytes). */
const BIG_RECORD_MARGIN = 1.25;

/** Most ranges of one partition fetched at once (each a Fetch request of its own). */
const MAX_RANGES = 8;

/** A record's framing in a batch besides key and value (lengths, deltas, attributes), about. */
const RECORD_FRAMING_BYTES = 20;
