import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Memory after full collections, counting `external` too: Node keeps a large ASCII string decoded
 * from a Buffer outside the V8 heap. A few rounds let freed Buffers be finalized. For tests that
 * show a bound holds (fill it, compare before and after), never for timing.
 */
export async function settledMemory(): Promise<number> {
  setFlagsFromString('--expose-gc'); // the test process was not started with it
  const gc = runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const { heapUsed, external } = process.memoryUsage();
  return heapUsed + external;
}
