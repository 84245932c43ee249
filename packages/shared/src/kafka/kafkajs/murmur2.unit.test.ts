import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/**
 * kafkajs's murmur2 (the default partitioner's hash) as patches/kafkajs@2.2.4.patch leaves it:
 * 32-bit arithmetic. Unpatched, it multiplied BigInts that were never truncated, so a 200 KiB
 * partition key took seconds to hash on the producer's thread (the cost grew with the cube of the
 * key's length) and a produce with such a key timed out on a loaded machine.
 */

const require = createRequire(import.meta.url);
const murmur2 = require('kafkajs/src/producer/partitioners/default/murmur2') as (
  key: Buffer | string,
) => number;

/** Kafka's Java murmur2, spelled out with BigInt truncated to 32 bits at every step. */
function reference(data: Buffer): number {
  const M = 0x5bd1e995n;
  const u32 = (x: bigint) => BigInt.asUintN(32, x);
  let h = u32(0x9747b28cn ^ BigInt(data.length));
  const whole = data.length - (data.length % 4);
  for (let i = 0; i < whole; i += 4) {
    let k = BigInt(data.readUInt32LE(i));
    k = u32(k * M);
    k ^= k >> 24n;
    k = u32(k * M);
    h = u32(h * M) ^ k;
  }
  const rest = data.length % 4;
  if (rest >= 3) h ^= BigInt(data[whole + 2] ?? 0) << 16n;
  if (rest >= 2) h ^= BigInt(data[whole + 1] ?? 0) << 8n;
  if (rest >= 1) h = u32((h ^ BigInt(data[whole] ?? 0)) * M);
  h ^= h >> 13n;
  h = u32(h * M);
  h ^= h >> 15n;
  return Number(BigInt.asIntN(32, h));
}

describe('kafkajs murmur2 (patched)', () => {
  it("gives the Java client's values (Kafka's own test vectors)", () => {
    expect(murmur2('21')).toBe(-973932308);
    expect(murmur2('foobar')).toBe(-790332482);
    expect(murmur2('a-little-bit-long-string')).toBe(-985981536);
    expect(murmur2('a-little-bit-longer-string')).toBe(-1486304829);
    expect(murmur2('lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8')).toBe(-58897971);
    expect(murmur2('abc')).toBe(479470107);
  });

  it('agrees with a 32-bit reference for any key, strings and bytes alike', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const key = Buffer.from(bytes);
        expect(murmur2(key)).toBe(reference(key));
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 60 }), (key) => {
        expect(murmur2(key)).toBe(reference(Buffer.from(key)));
      }),
    );
  });

  it('hashes a 4 MiB key like a small one (unpatched, it would run for hours)', () => {
    const key = Buffer.alloc(4 * 1024 * 1024, 0xa7);
    expect(murmur2(key)).toBe(reference(key));
  });
});
