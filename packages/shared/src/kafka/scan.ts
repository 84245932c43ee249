import { randomBytes } from 'node:crypto';
import { RequesterError } from '../errors/index.ts';
import type { KafkaClient, KafkaRecord } from './types.ts';

/**
 * Reads a whole topic once, from its first retained record up to the end offsets it had when the
 * scan began (records written meanwhile are not waited for), in a throwaway consumer group that
 * commits nothing — so nothing of the scan stays behind in Kafka. For admin tools (the DLQ
 * commands), not for the data path.
 */

export interface ScanOptions {
  /** Called for each record, in offset order within a partition. */
  onMessage(message: KafkaRecord, partition: number): void | Promise<void>;
  /**
   * Called when `onMessage` threw for a record: the scan skips it and goes on (one record a tool
   * cannot handle must not end the scan, nor make the client restart it over and over).
   */
  onFailed?(message: KafkaRecord, partition: number, err: unknown): void;
  /** Called after each batch: records read so far, and the count the scan expects. */
  onProgress?(read: number, expected: number): void;
  /** Group id prefix (a random suffix is added). */
  groupPrefix?: string;
  /**
   * A scan ends early when no batch came for this long after joining: a partition whose last
   * offsets hold no data records (transaction markers) is never "reached". Default 5 s.
   */
  idleMs?: number;
}

export interface ScanResult {
  read: number;
  /** Records `onMessage` threw for (skipped). */
  failed: number;
  /** Partitions whose end was not reached (idle stop); empty when the scan is complete. */
  incomplete: number[];
}

/** End offset (exclusive) per partition that holds records now. */
async function endOffsets(
  kafka: KafkaClient,
  topic: string,
): Promise<{ ends: Map<number, bigint>; expected: number }> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    if (!(await admin.listTopics()).includes(topic))
      throw new RequesterError('not_found', `topic ${topic} does not exist`);
    const ends = new Map<number, bigint>();
    let expected = 0;
    for (const { partition, high, low } of await admin.topicOffsets(topic)) {
      if (BigInt(high) > BigInt(low)) ends.set(partition, BigInt(high));
      expected += Number(BigInt(high) - BigInt(low));
    }
    return { ends, expected };
  } finally {
    await admin.disconnect();
  }
}

export async function scanTopic(
  kafka: KafkaClient,
  topic: string,
  options: ScanOptions,
): Promise<ScanResult> {
  const { ends, expected } = await endOffsets(kafka, topic);
  if (ends.size === 0) return { read: 0, failed: 0, incomplete: [] };
  const groupId = `${options.groupPrefix ?? 'requester-scan'}-${randomBytes(6).toString('hex')}`;
  const consumer = kafka.consumer({ groupId, maxWaitMs: 500 });
  let read = 0;
  let failed = 0;
  const offs: Array<() => void> = [];
  try {
    await new Promise<void>((resolve, reject) => {
      const idleMs = options.idleMs ?? 5_000;
      let idle: NodeJS.Timeout | undefined;
      const touch = () => {
        clearTimeout(idle);
        idle = setTimeout(resolve, idleMs);
      };
      offs.push(consumer.onAssigned(touch));
      // The client restarts the consumer itself after a retriable crash (e.g. "the coordinator is
      // loading" on a broker that just started): only a crash it gives up on ends the scan.
      offs.push(
        consumer.onCrash(({ error, restart }) => {
          if (!restart) reject(error);
        }),
      );
      consumer
        .start({
          topics: [topic],
          fromBeginning: true,
          commit: 'never',
          onBatch: async (batch) => {
            touch();
            const end = ends.get(batch.partition);
            if (end === undefined) return;
            for (const record of batch.records) {
              if (BigInt(record.offset) >= end) break;
              try {
                await options.onMessage(record, batch.partition);
              } catch (err) {
                failed++;
                options.onFailed?.(record, batch.partition, err);
              }
              read++;
            }
            options.onProgress?.(read, expected);
            if (BigInt(batch.lastOffset) >= end - 1n) ends.delete(batch.partition);
            if (ends.size === 0) {
              clearTimeout(idle);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    for (const off of offs) off();
    await consumer.stop();
  }
  return { read, failed, incomplete: [...ends.keys()] };
}
