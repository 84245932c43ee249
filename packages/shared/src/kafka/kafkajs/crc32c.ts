import { createRequire } from 'node:module';

/**
 * The CRC-32C kafkajs puts in every record batch it produces. Its own is a byte-at-a-time table in
 * JavaScript: about 2.4 ms per MiB here, most of the produce CPU for large results.
 * `@node-rs/crc32` is SIMD, about 15 times faster; its prebuilt binary
 * comes as an optional dependency per platform, so it may be missing, and then kafkajs keeps its
 * own. kafkajs has no option for it: patches/kafkajs@2.2.4.patch gives its CRC module a `use`.
 */

const require = createRequire(import.meta.url);

/** The CRC-32C of `buffer` following bytes whose CRC was `previous` (0: none), unsigned. */
type Crc = (buffer: Buffer, previous?: number) => number;

interface KafkajsCrc32C {
  (buffer: Buffer, previous?: number): number;
  /** The CRC of the chunks one after the other. Added by the patch. */
  ofChunks?: (chunks: Buffer[]) => number;
  /** Replaces the implementation (not a function: kafkajs's own again). Added by the patch. */
  use?: (implementation: Crc | null) => void;
  /** kafkajs's own implementation. Added by the patch. */
  pure?: Crc;
}

const kafkajsCrc = require('kafkajs/src/protocol/recordBatch/crc32C') as KafkajsCrc32C;

/** The native CRC-32C, or null when its binary is not there for this platform. */
export function nativeCrc32c(): Crc | null {
  try {
    const { crc32c } = require('@node-rs/crc32') as { crc32c(input: Buffer, initialState?: number): number };
    return (buffer, previous = 0) => crc32c(buffer, previous);
  } catch {
    return null;
  }
}

/** kafkajs's own CRC-32C (the fallback, and the reference in tests). */
export const pureCrc32c: Crc = kafkajsCrc.pure ?? kafkajsCrc;

/** What kafkajs computes record batch checksums with (after installCrc32c). */
export const kafkajsCrc32c: Crc = kafkajsCrc;

/**
 * Makes kafkajs use the native CRC-32C when there is one (`null`: its own); returns which it uses.
 * Idempotent. An unpatched kafkajs (no `use`) keeps its own.
 */
export function installCrc32c(native: Crc | null = nativeCrc32c()): 'native' | 'js' {
  if (!kafkajsCrc.use) return 'js';
  kafkajsCrc.use(native);
  return native ? 'native' : 'js';
}
