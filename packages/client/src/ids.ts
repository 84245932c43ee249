/**
 * Web Crypto on every runtime: the global one (Node ≥ 19, Deno, Bun, browsers, workers), else Node
 * 18's `node:crypto`, imported only where the global is missing.
 */
export const webCrypto: typeof globalThis.crypto = globalThis.crypto ?? (await nodeWebCrypto());

async function nodeWebCrypto(): Promise<typeof globalThis.crypto> {
  // A computed specifier: bundlers for runtimes that have the global leave node:crypto alone.
  const specifier = 'node:crypto';
  const { webcrypto } = (await import(specifier)) as { webcrypto: typeof globalThis.crypto };
  return webcrypto;
}

/** A fresh requestId (a UUID v4: 36 printable characters, within the contract's 1-256). */
export function newRequestId(): string {
  return webCrypto.randomUUID();
}

/** A W3C traceparent that starts a new trace, sampled, for a caller that has none. */
export function newTraceparent(): string {
  return `00-${hex(16)}-${hex(8)}-01`;
}

function hex(bytes: number): string {
  const random = webCrypto.getRandomValues(new Uint8Array(bytes));
  // All-zero ids are invalid in W3C Trace Context: one byte set is enough.
  if (random.every((b) => b === 0)) random[0] = 1;
  return Array.from(random, (b) => b.toString(16).padStart(2, '0')).join('');
}
