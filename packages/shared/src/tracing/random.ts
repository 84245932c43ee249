import { randomFillSync } from 'node:crypto';

/**
 * Random ids (hex) cut from a buffer of random bytes refilled in bulk: `randomBytes` per id cost
 * a trip into the CSPRNG (and a Buffer) for each new traceparent, ~3 % of an accept's CPU. The
 * bytes come from the same CSPRNG, each is handed out once, and a refill overwrites them all, so
 * ids stay as random and as unique as before.
 */
export class RandomPool {
  private readonly bytes: Buffer;
  private readonly fill: (buffer: Buffer) => void;
  private next: number;

  /** `fill` is for tests; the default is the CSPRNG. */
  constructor(size = 4096, fill: (buffer: Buffer) => void = (buffer) => void randomFillSync(buffer)) {
    this.bytes = Buffer.allocUnsafe(size);
    this.fill = fill;
    this.next = size; // filled on first use
  }

  /** `n` unused random bytes as lower-case hex (2n characters); n at most the pool's size. */
  hex(n: number): string {
    if (n > this.bytes.length)
      throw new RangeError(`at most ${this.bytes.length} bytes at once (asked ${n})`);
    if (this.next + n > this.bytes.length) {
      this.fill(this.bytes);
      this.next = 0;
    }
    const text = this.bytes.toString('hex', this.next, this.next + n);
    this.next += n;
    return text;
  }

  /** Like `hex`, but never all zeros (W3C: an all-zero trace-id or span-id is invalid). */
  nonZeroHex(n: number): string {
    for (;;) {
      const text = this.hex(n);
      if (!ALL_ZEROS.test(text)) return text;
    }
  }
}

const ALL_ZEROS = /^0+$/;
