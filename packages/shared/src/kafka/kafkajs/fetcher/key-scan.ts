import { RequesterError } from '../../../errors/index.ts';
import { withTimeout } from '../../batching.ts';
import type { FetchedRecord } from '../../types.ts';
import { partitionOfKey } from '../partitioner.ts';
import { type LowLevelCluster, leaderOf, type RawRecord, READ_COMMITTED } from './internals.ts';
import type { ConnectionPool } from './pool.ts';
import { ownedRecord } from './record-cache.ts';

export interface KeyScanOptions {
  /** Bound on the whole scan. */
  timeoutMs: number;
  /** Bytes asked of the partition per Fetch. */
  requestMaxBytes: number;
}

/**
 * The task journal's lookup. A key lives in one partition — the one the producer's default
 * partitioner (murmur2, as Kafka's Java client) gives it — and ListOffsets by timestamp says
 * where `sinceMs` begins in it; so one partition is read, forward, in fetches of
 * `requestMaxBytes`, keeping the records of the key. Records are copies (see ownedRecord).
 */
export async function scanKey(
  pool: ConnectionPool,
  options: KeyScanOptions,
  topic: string,
  key: string,
  sinceMs: number,
): Promise<FetchedRecord[]> {
  const deadline = Date.now() + options.timeoutMs;
  const left = () => Math.max(1, deadline - Date.now());
  const cluster = await withTimeout(pool.cluster(), left(), 'Kafka fetcher: connect timed out');
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
      fetchFrom(cluster, topic, partition, offset, options.requestMaxBytes),
      left(),
      `Kafka fetcher: ${topic}/${partition} not read within ${options.timeoutMs} ms`,
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

async function fetchFrom(
  cluster: LowLevelCluster,
  topic: string,
  partition: number,
  offset: bigint,
  maxBytes: number,
): Promise<RawRecord[]> {
  const leader = leaderOf(cluster, topic, partition);
  if (leader === undefined)
    throw new RequesterError('dependency_unavailable', `no leader known for ${topic}/${partition}`);
  const broker = await cluster.findBroker({ nodeId: String(leader) });
  const response = await broker.fetch({
    maxWaitTime: 0,
    minBytes: 1,
    maxBytes,
    isolationLevel: READ_COMMITTED,
    topics: [{ topic, partitions: [{ partition, fetchOffset: offset.toString(), maxBytes }] }],
  });
  return response.responses[0]?.partitions[0]?.messages ?? [];
}
