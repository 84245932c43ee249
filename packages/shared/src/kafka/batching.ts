import { RequesterError } from '../errors/index.ts';
import type { OutgoingRecord } from './types.ts';

/**
 * Bytes of records sent in one produce request at most. The broker checks each partition's
 * record batch against the topic's max.message.bytes: one request carrying, say, 64 results with
 * large bodies would be refused as a whole (MESSAGE_TOO_LARGE, not retriable) although every
 * record fits on its own — and retrying the same batch would fail forever. Half of the broker's
 * default limit, so that topics created elsewhere with the default are safe too.
 */
export const PRODUCE_CHUNK_BYTES = 512 * 1024;

/**
 * Bytes of one partition's record batch in one produce request at most once it holds a big record
 * (BIG_RECORD_BYTES or more; a bigger record goes alone). A reader by offset (the executor's
 * fetcher) receives the whole batch holding the offset it asks for: with 512 KiB requests to one
 * partition, each 64 KiB `in` record read cost ~8 records received, and the lease order (scattered
 * over the backlog) leaves little for a cache of the rest to save. Batches of small records only
 * are left as big as PRODUCE_CHUNK_BYTES allows: their neighbours are cheap to receive and cache.
 */
export const PARTITION_BATCH_BYTES = 64 * 1024;

/**
 * A record this big caps its partition's batch at PARTITION_BATCH_BYTES (see there); the fetcher
 * caches it whenever a response brings it and asks for no read-ahead after it.
 */
export const BIG_RECORD_BYTES = 8 * 1024;

/**
 * Consecutive runs of records of at most `budget` bytes each (a bigger record goes alone). With
 * `partitionOf` (which partition a record goes to, or a stand-in that is the same for records
 * that may share one), a run also ends before a record that would take its partition's batch past
 * PARTITION_BATCH_BYTES while that batch holds, or the record is, a big one.
 */
export function chunksOf(
  records: OutgoingRecord[],
  budget: number,
  partitionOf?: (record: OutgoingRecord) => string | number,
): OutgoingRecord[][] {
  const chunks: OutgoingRecord[][] = [];
  let chunk: OutgoingRecord[] = [];
  let bytes = 0;
  const batches = new Map<string | number, { bytes: number; big: boolean }>();
  for (const record of records) {
    const size = recordBytes(record);
    const big = size >= BIG_RECORD_BYTES;
    const partition = partitionOf?.(record);
    const batch = partition === undefined ? undefined : batches.get(partition);
    const overBatch = batch !== undefined && (big || batch.big) && batch.bytes + size > PARTITION_BATCH_BYTES;
    if (chunk.length > 0 && (bytes + size > budget || overBatch)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
      batches.clear();
    }
    chunk.push(record);
    bytes += size;
    if (partition !== undefined) {
      const held = batches.get(partition) ?? { bytes: 0, big: false };
      batches.set(partition, { bytes: held.bytes + size, big: held.big || big });
    }
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/** A record's size in a record batch, closely enough for chunking (record framing ≈ 20 bytes). */
function recordBytes(record: OutgoingRecord): number {
  const size = (data: Buffer | string | null | undefined) =>
    data == null ? 0 : typeof data === 'string' ? Buffer.byteLength(data) : data.length;
  let bytes = 20 + size(record.key) + size(record.value);
  for (const [name, value] of Object.entries(record.headers ?? {}))
    bytes += 8 + Buffer.byteLength(name) + size(value);
  return bytes;
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
