/**
 * Range sizing: which offsets of a partition one Fetch asks for, and how many bytes. Pure; the
 * fetcher passes the topic's record size it last saw.
 *
 * @module
 */

import { BIG_RECORD_BYTES } from '../../batching.ts';

/** A range of a partition to fetch: from this offset, at most this many bytes. */
export interface FetchRange {
  from: bigint;
  bytes: number;
}

/**
 * The least a range asks of a partition (sized by its wants, see rangeBytes), and the gap between
 * wanted offsets below which they share a range (see rangesOf).
 */
export const READ_AHEAD_BYTES = 256 * 1024;

/** A range of big records asks this much more than its records' estimated bytes (see rangeBytes). */
const BIG_RECORD_MARGIN = 1.25;

/** Most ranges of one partition fetched at once (each a Fetch request of its own). */
export const MAX_RANGES = 8;

/** A record's framing in a batch besides key and value (lengths, deltas, attributes), about. */
const RECORD_FRAMING_BYTES = 20;

/**
 * A partition's pending offsets (ascending, at least one) as ranges to fetch at once (at most
 * MAX_RANGES; the rest wait for the next round): offsets closer than READ_AHEAD_BYTES at the
 * topic's record size last seen share a range. A lease batch's offsets are scattered, and one
 * range from the smallest to the largest would receive every record between them; a range per
 * cluster receives its records (and the rest of their batches, which the broker sends whole).
 */
export function rangesOf(
  offsets: readonly bigint[],
  perRecord: number | undefined,
  partitionMaxBytes: number,
): FetchRange[] {
  if (perRecord === undefined)
    return [{ from: offsets[0]!, bytes: rangeBytes(offsets, undefined, partitionMaxBytes) }];
  const gap = BigInt(Math.max(1, Math.floor(READ_AHEAD_BYTES / perRecord)));
  const ranges: FetchRange[] = [];
  let start = 0;
  for (let i = 1; i <= offsets.length && ranges.length < MAX_RANGES; i++) {
    const offset = offsets[i];
    if (offset !== undefined && offset - offsets[i - 1]! <= gap) continue;
    const run = offsets.slice(start, i);
    ranges.push({ from: run[0]!, bytes: rangeBytes(run, perRecord, partitionMaxBytes) });
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
export function rangeBytes(
  offsets: readonly bigint[],
  perRecord: number | undefined,
  partitionMaxBytes: number,
): number {
  const max = partitionMaxBytes;
  if (perRecord === undefined) return max;
  const span = Number(offsets.at(-1)! - offsets[0]!) + 1;
  if (perRecord >= BIG_RECORD_BYTES) return Math.min(max, Math.ceil(perRecord * span * BIG_RECORD_MARGIN));
  return Math.min(max, Math.max(READ_AHEAD_BYTES, Math.ceil(perRecord * span)));
}

/** The mean bytes per record of a response's records (key, value, framing); undefined for none. */
export function meanRecordBytes(
  messages: ReadonlyArray<{ key: Buffer | null; value: Buffer | null }>,
): number | undefined {
  if (messages.length === 0) return undefined;
  let bytes = 0;
  for (const raw of messages)
    bytes += (raw.value?.length ?? 0) + (raw.key?.length ?? 0) + RECORD_FRAMING_BYTES;
  return bytes / messages.length;
}
