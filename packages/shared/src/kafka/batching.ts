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

/** Consecutive runs of records of at most `budget` bytes each (a bigger record goes alone). */
export function chunksOf(records: OutgoingRecord[], budget: number): OutgoingRecord[][] {
  const chunks: OutgoingRecord[][] = [];
  let chunk: OutgoingRecord[] = [];
  let bytes = 0;
  for (const record of records) {
    const size = recordBytes(record);
    if (chunk.length > 0 && bytes + size > budget) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(record);
    bytes += size;
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
