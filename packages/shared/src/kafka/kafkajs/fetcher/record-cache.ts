/**
 * The fetcher's record cache: recently fetched records, least recently used out first, bounded by
 * their bytes, with the counts `cacheStats()` reports.
 *
 * @module
 */

import { LRUCache } from 'lru-cache';
import type { FetchedRecord, FetcherCacheStats, KafkaRef } from '../../types.ts';
import type { RawRecord } from './internals.ts';

const RECORD_OVERHEAD_BYTES = 256;

/**
 * What a record is charged in the cache: its key and value plus RECORD_OVERHEAD_BYTES (ref,
 * headers, the LRU's slots).
 */
export function chargedBytes(record: { key: Buffer | null; value: Buffer | null }): number {
  return (record.value?.length ?? 0) + (record.key?.length ?? 0) + RECORD_OVERHEAD_BYTES;
}

/** A record bigger than the whole bound is not kept; a bound of 0 keeps none. */
export class RecordCache {
  private readonly lru: LRUCache<string, FetchedRecord> | undefined;
  /** Neighbours in the cache that no fetch has asked for yet (for cacheStats). */
  private readonly unread = new WeakSet<FetchedRecord>();
  private readonly stats: FetcherCacheStats = { hits: 0, misses: 0, neighbours: 0, evictedUnread: 0 };

  private readonly maxBytes: number;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
    this.lru =
      maxBytes <= 0
        ? undefined
        : new LRUCache<string, FetchedRecord>({
            maxSize: maxBytes,
            sizeCalculation: chargedBytes,
            dispose: (record, _key, reason) => {
              if (reason === 'evict' && this.unread.has(record)) this.stats.evictedUnread++;
            },
          });
  }

  /** The record at `ref` if held (counted as a hit, and as read). */
  get(ref: KafkaRef): FetchedRecord | undefined {
    const cached = this.lru?.get(refKey(ref));
    if (cached) {
      this.stats.hits++;
      this.unread.delete(cached);
    }
    return cached;
  }

  countMisses(count: number): void {
    this.stats.misses += count;
  }

  /**
   * Puts a copy of a received record in the cache unless it is there already (or too big for it);
   * returns the copy, which a wanted record is answered with.
   */
  keep(topic: string, partition: number, raw: RawRecord, isWanted: boolean): FetchedRecord | undefined {
    const lru = this.lru;
    if (!lru || chargedBytes(raw) > this.maxBytes) return undefined;
    const key = refKey({ topic, partition, offset: raw.offset });
    // A neighbour held already is left where it is in the LRU order (it may be one answered before).
    const held = isWanted ? lru.get(key) : lru.peek(key);
    if (held) return held;
    const record = ownedRecord(topic, partition, raw);
    lru.set(key, record);
    if (!isWanted) {
      this.stats.neighbours++;
      this.unread.add(record);
    }
    return record;
  }

  bytes(): number {
    return this.lru?.calculatedSize ?? 0;
  }

  statsNow(): FetcherCacheStats {
    return { ...this.stats };
  }

  clear(): void {
    this.lru?.clear();
  }
}

export function refKey(ref: KafkaRef): string {
  return `${ref.topic}\u0000${ref.partition}\u0000${BigInt(ref.offset)}`;
}

export function toRecord(topic: string, partition: number, raw: RawRecord): FetchedRecord {
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
export function ownedRecord(topic: string, partition: number, raw: RawRecord): FetchedRecord {
  return { ...toRecord(topic, partition, raw), key: ownCopy(raw.key), value: ownCopy(raw.value) };
}

function ownCopy(view: Buffer | null): Buffer | null {
  if (!view) return null;
  const copy = Buffer.allocUnsafeSlow(view.length);
  view.copy(copy);
  return copy;
}
