import { createRequire } from 'node:module';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { installCrc32c, kafkajsCrc32c, nativeCrc32c, pureCrc32c } from './crc32c.ts';

const require = createRequire(import.meta.url);
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as {
  RecordBatch(options: { records: unknown[] }): Promise<{ buffer: Buffer }>;
};
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as (record: object) => unknown;

// Lengths around the native implementation's block sizes, and the odd bytes before and after them.
const buffers = fc.oneof(
  fc.uint8Array({ minLength: 0, maxLength: 64 }),
  fc.uint8Array({ minLength: 1000, maxLength: 5000 }),
);

/** The CRC field of an encoded record batch, and the CRC of the bytes it covers (kafkajs's own). */
async function batchChecksums(values: Buffer[]): Promise<{ field: number; expected: number }> {
  const records = values.map((value, offsetDelta) => Record({ offsetDelta, key: null, value }));
  const { buffer } = await RecordBatch({ records });
  // firstOffset int64, length int32, partitionLeaderEpoch int32, magic int8, then the CRC of the rest.
  return { field: buffer.readUInt32BE(17), expected: pureCrc32c(buffer.subarray(21)) };
}

describe('CRC-32C of kafkajs record batches', () => {
  afterAll(() => installCrc32c());

  it('the native CRC-32C is there on this platform', () => {
    expect(nativeCrc32c()).toBeTypeOf('function');
    expect(installCrc32c()).toBe('native');
  });

  it('the native CRC-32C equals kafkajs’s own on random buffers', () => {
    const native = nativeCrc32c();
    if (!native) throw new Error('no native CRC-32C on this platform');
    fc.assert(
      fc.property(buffers, (bytes) => {
        const buffer = Buffer.from(bytes);
        expect(native(buffer)).toBe(pureCrc32c(buffer));
      }),
    );
    // In pieces (a record batch's CRC runs over its chunks): the CRC so far carries over.
    fc.assert(
      fc.property(buffers, buffers, (a, b) => {
        const [first, second] = [Buffer.from(a), Buffer.from(b)];
        const whole = pureCrc32c(Buffer.concat([first, second]));
        expect(native(second, native(first))).toBe(whole);
        expect(pureCrc32c(second, pureCrc32c(first))).toBe(whole);
      }),
    );
    // The known answer of CRC-32C (RFC 3720, iSCSI) for "123456789".
    expect(native(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(pureCrc32c(Buffer.from('123456789'))).toBe(0xe3069283);
  });

  it('record batches carry the right CRC with the native implementation and without it', async () => {
    const values = [Buffer.alloc(70_000, 'x'), Buffer.from('small'), Buffer.alloc(0)];
    for (const mode of ['native', 'js'] as const) {
      expect(installCrc32c(mode === 'native' ? nativeCrc32c() : null)).toBe(mode);
      const { field, expected } = await batchChecksums(values);
      expect(field).toBe(expected);
      expect(kafkajsCrc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    }
  });
});
