import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pureCrc32c } from './crc32c.ts';

/**
 * kafkajs's Encoder as patches/kafkajs@2.2.4.patch leaves it: nested encoders of 8 KiB and more
 * are appended by reference and copied once, when the outermost buffer is read. What a produce
 * request carries must be byte for byte what kafkajs's own decoder reads back.
 */

const require = createRequire(import.meta.url);

interface Encoder {
  buffer: Buffer;
  size(): number;
  writeInt32(value: number): Encoder;
  writeString(value: string): Encoder;
  writeEncoder(value: Encoder): Encoder;
  writeArray(values: Encoder[]): Encoder;
  writeVarInt(value: number): Encoder;
  writeVarLong(value: number): Encoder;
}
const Encoder = require('kafkajs/src/protocol/encoder') as (new () => Encoder) & {
  sizeOfVarLong(value: number): number;
};
const Decoder = require('kafkajs/src/protocol/decoder') as new (buffer: Buffer) => unknown;
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as {
  RecordBatch(options: { records: unknown[]; lastOffsetDelta: number }): Promise<Encoder>;
};
const decodeRecordBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder') as (
  decoder: unknown,
) => Promise<{ records: Array<{ key: Buffer | null; value: Buffer | null; offset: string }> }>;
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as (record: object) => Encoder;

const value = fc.oneof(
  fc.string({ maxLength: 50 }),
  fc.integer({ min: 0, max: 40_000 }).map((n) => 'é'.repeat(n)),
  fc.uint8Array({ maxLength: 30_000 }).map((bytes) => Buffer.from(bytes)),
  fc.constant(null),
);

describe('kafkajs Encoder (patched)', () => {
  it('a produce request nesting record batches decodes to the records written', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(value, { minLength: 1, maxLength: 8 }), async (values) => {
        const records = values.map((v, offsetDelta) =>
          Record({ offsetDelta, key: `k${offsetDelta}`, value: v }),
        );
        const batch = await RecordBatch({ records, lastOffsetDelta: records.length - 1 });
        // As produce v3 nests it: partition, topic, request, then the size-prefixed frame.
        const partition = new Encoder().writeInt32(7).writeInt32(batch.size()).writeEncoder(batch);
        const topic = new Encoder().writeString('topic').writeArray([partition]);
        const payload = new Encoder().writeString('client').writeArray([topic]);
        const frame = new Encoder().writeInt32(payload.size()).writeEncoder(payload);
        const bytes = frame.buffer;
        expect(bytes.length).toBe(frame.size());
        expect(frame.buffer.equals(bytes)).toBe(true);

        const payloadStart = 4 + 2 + 'client'.length + 4;
        const partitionStart = payloadStart + 2 + 'topic'.length + 4;
        expect(bytes.readInt32BE(0)).toBe(bytes.length - 4);
        expect(bytes.readInt32BE(partitionStart)).toBe(7);
        const batchBytes = bytes.subarray(partitionStart + 8);
        expect(batchBytes.length).toBe(bytes.readInt32BE(partitionStart + 4));
        expect(batchBytes.readUInt32BE(17)).toBe(pureCrc32c(batchBytes.subarray(21)));

        const decoded = await decodeRecordBatch(new Decoder(batchBytes));
        expect(decoded.records.map((r) => r.key?.toString())).toEqual(values.map((_, i) => `k${i}`));
        expect(decoded.records.map((r) => r.value)).toEqual(
          values.map((v) => (v === null ? null : Buffer.from(v))),
        );
      }),
      { numRuns: 50 },
    );
  });

  it('writes after a nested encoder follow it, and reading the buffer twice changes nothing', () => {
    const big = new Encoder().writeString('x'.repeat(10_000));
    const outer = new Encoder().writeInt32(1).writeEncoder(big).writeInt32(2);
    const first = outer.buffer;
    outer.writeInt32(3);
    const second = outer.buffer;
    expect(second.length).toBe(4 + 2 + 10_000 + 4 + 4);
    expect(second.subarray(0, first.length)).toEqual(first);
    expect([second.readInt32BE(0), second.readInt32BE(10_006), second.readInt32BE(10_010)]).toEqual([
      1, 2, 3,
    ]);
  });

  it('the bytes an encoded record allocates grow linearly with its key', async () => {
    // A partition key near the limit must cost in proportion to its size: the patched encoder
    // copies each byte a bounded number of times. Counted in bytes allocated, not in time.
    const allocatedFor = async (keyBytes: number) => {
      const allocUnsafe = Buffer.allocUnsafe;
      const concat = Buffer.concat;
      let bytes = 0;
      Buffer.allocUnsafe = (size: number) => {
        bytes += size;
        return allocUnsafe(size);
      };
      Buffer.concat = (list: readonly Uint8Array[], total?: number) => {
        const joined = concat(list, total);
        bytes += joined.length;
        return joined;
      };
      try {
        const record = Record({ offsetDelta: 0, key: Buffer.alloc(keyBytes, 1), value: 'v' });
        const batch = await RecordBatch({ records: [record], lastOffsetDelta: 0 });
        const frame = new Encoder().writeInt32(batch.size()).writeEncoder(batch);
        expect(frame.buffer.length).toBeGreaterThan(keyBytes);
      } finally {
        Buffer.allocUnsafe = allocUnsafe;
        Buffer.concat = concat;
      }
      return bytes;
    };
    const sizes = [50 * 1024, 100 * 1024, 200 * 1024, 400 * 1024];
    const allocated: number[] = [];
    for (const size of sizes) allocated.push(await allocatedFor(size));
    allocated.forEach((bytes, i) => {
      expect(bytes).toBeLessThan(8 * (sizes[i] as number));
      if (i > 0) expect(bytes / (allocated[i - 1] as number)).toBeLessThan(2.6);
    });
  });

  /** The zigzag LEB128 of a 64-bit integer, as the Kafka protocol defines varints and varlongs. */
  const zigzagLeb128 = (value: bigint) => {
    let n = BigInt.asUintN(64, (value << 1n) ^ (value >> 63n));
    const bytes: number[] = [];
    while (n >= 0x80n) {
      bytes.push(Number(n & 0x7fn) | 0x80);
      n >>= 7n;
    }
    bytes.push(Number(n));
    return Buffer.from(bytes);
  };

  it('writes varints and varlongs as the protocol defines them, after and before other bytes', () => {
    const int32 = fc.oneof(fc.integer(), fc.integer({ min: -200, max: 200 }));
    const int53 = fc.oneof(int32, fc.maxSafeInteger(), fc.integer({ min: -(2 ** 31) - 5, max: 2 ** 31 + 5 }));
    fc.assert(
      fc.property(int32, int53, (small, large) => {
        const bytes = new Encoder().writeInt32(7).writeVarInt(small).writeVarLong(large).writeInt32(9).buffer;
        const varint = zigzagLeb128(BigInt(small));
        const varlong = zigzagLeb128(BigInt(large));
        expect(bytes).toEqual(
          Buffer.concat([Buffer.from([0, 0, 0, 7]), varint, varlong, Buffer.from([0, 0, 0, 9])]),
        );
        expect(Encoder.sizeOfVarLong(large)).toBe(varlong.length);
      }),
      { numRuns: 2_000 },
    );
  });

  it('encodes a record in the one buffer sized for it', () => {
    // Its encoder is made to the record's size: a varint written near the end must not grow it.
    const allocUnsafe = Buffer.allocUnsafe;
    const sizes: number[] = [];
    Buffer.allocUnsafe = (size: number) => {
      sizes.push(size);
      return allocUnsafe(size);
    };
    try {
      for (const value of ['v', 'x'.repeat(1_000), null]) {
        sizes.length = 0;
        const record = Record({ offsetDelta: 3, timestampDelta: 12, key: 'k', value });
        expect(sizes).toEqual([record.size()]);
      }
    } finally {
      Buffer.allocUnsafe = allocUnsafe;
    }
  });

  it('writes a varint or a small varlong without a Buffer of its own', () => {
    // Unpatched, each varint was an array turned into a Buffer (Buffer.from) and copied: a record
    // has four or more, and a small varlong (a record's timestamp delta) one BigInt Long per 7 bits.
    const from = Buffer.from;
    let buffers = 0;
    Buffer.from = ((...args: Parameters<typeof Buffer.from>) => {
      buffers++;
      return from(...args);
    }) as typeof Buffer.from;
    try {
      new Encoder()
        .writeVarInt(300)
        .writeVarInt(-1)
        .writeVarLong(1_000)
        .writeVarLong(-(2 ** 30));
    } finally {
      Buffer.from = from;
    }
    expect(buffers).toBe(0);
  });
});
