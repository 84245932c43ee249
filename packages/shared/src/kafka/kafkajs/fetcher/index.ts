import { RequesterError } from '../../../errors/index.ts';
import type { Logger } from '../../../log/index.ts';
import { BIG_RECORD_BYTES, withTimeout } from '../../batching.ts';
import type { KafkaSecurity } from '../../security.ts';
import {
  type FetchedRecord,
  type Fetcher,
  type FetcherCacheStats,
  type FetcherOptions,
  type FetchOutcome,
  type KafkaRef,
  RecordUnavailableError,
} from '../../types.ts';
import { type FetchResponse, type LowLevelCluster, leaderOf, READ_COMMITTED } from './internals.ts';
import { scanKey } from './key-scan.ts';
import { ConnectionPool } from './pool.ts';
import { meanRecordBytes, READ_AHEAD_BYTES, rangesOf } from './ranges.ts';
import { chargedBytes, RecordCache, refKey, toRecord } from './record-cache.ts';

/**
 * Reads records of a topic by offset (docs/architecture.md §9). kafkajs has no public API for it and the
 * consumer-group-plus-seek route costs a group join per read, so the fetcher drives kafkajs's
 * low-level cluster directly (`internals.ts`, the only file that reaches into kafkajs): leader
 * lookup from metadata, then one Fetch request per broker carrying one range per topic-partition
 * (`ranges.ts`). Records read are kept in a byte-bounded LRU (`record-cache.ts`); the journal's
 * lookup by key is `key-scan.ts`.
 */

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
  private readonly pool: ConnectionPool;
  private readonly cache: RecordCache;
  /** Bytes per record last seen in each topic's responses: what sizes the next fetches. */
  private readonly recordBytes = new Map<string, number>();
  /** A fetch failed since the last one that worked: the next that works is logged. */
  private failing = false;

  constructor(settings: FetcherSettings) {
    this.options = { ...DEFAULTS, ...definedOnly(settings) };
    this.log = settings.logger.child({ component: 'kafka-fetcher' });
    this.cache = new RecordCache(this.options.cacheBytes);
    this.pool = new ConnectionPool(
      this.options.connections,
      {
        brokers: settings.brokers,
        clientId: settings.clientId,
        security: settings.security,
        requestTimeoutMs: this.options.timeoutMs,
      },
      this.log,
    );
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
      const cached = this.cache.get(ref);
      if (cached) found.set(refKey(ref), { ok: true, record: cached });
      else addWant(wants, ref);
    }
    for (const want of wants.values()) this.cache.countMisses(want.offsets.length);
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
    return this.cache.bytes();
  }

  cacheStats(): FetcherCacheStats {
    return this.cache.statsNow();
  }

  /** The task journal's lookup (see scanKey). */
  readKey(topic: string, key: string, sinceMs: number): Promise<FetchedRecord[]> {
    return scanKey(
      this.pool,
      { timeoutMs: this.options.timeoutMs, requestMaxBytes: this.options.requestMaxBytes },
      topic,
      key,
      sinceMs,
    );
  }

  async close(): Promise<void> {
    await this.pool.close();
    this.cache.clear();
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
        this.pool.cluster(),
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
          if (this.failing) {
            this.failing = false;
            this.log.info('Kafka fetcher reading again');
          }
        } catch (err) {
          failure = err;
          // An offset out of range is an answer (a record expired), not a broker that fails.
          if ((err as { name?: string }).name !== 'KafkaJSOffsetOutOfRange') this.failing = true;
          await this.recover(cluster, err, wants, settle);
        }
      }
    } catch (err) {
      failure = err;
      this.failing = true;
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
      const leader = leaderOf(cluster, want.topic, want.partition);
      if (leader === undefined) throw new LeaderUnknown(want);
      byLeader.set(leader, [...(byLeader.get(leader) ?? []), want]);
    }
    await Promise.all(
      [...byLeader].flatMap(([leader, group]) => {
        // A partition's wants in ranges of near offsets; request k carries every partition's k-th.
        const ranges = group.map((want) => ({ want, ranges: this.rangesOf(want) }));
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

  /** A partition's pending offsets as ranges to fetch at once (see rangesOf). */
  private rangesOf(want: PartitionWant) {
    return rangesOf(want.offsets, this.recordBytes.get(want.topic), this.options.partitionMaxBytes);
  }

  private learnRecordBytes(
    topic: string,
    messages: ReadonlyArray<{ key: Buffer | null; value: Buffer | null }>,
  ): void {
    const mean = meanRecordBytes(messages);
    if (mean === undefined) return;
    // Only as many topics as the process reads; a bound all the same (topics made per test run).
    if (this.recordBytes.size >= 10_000 && !this.recordBytes.has(topic)) this.recordBytes.clear();
    this.recordBytes.set(topic, mean);
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
          const record =
            isWanted || neighbour ? this.cache.keep(topicName, partition, raw, isWanted) : undefined;
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

function tpKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
