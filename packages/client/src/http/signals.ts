/**
 * Abort signals and pauses that run on Node ≥ 18 (no `AbortSignal.any`, which came in Node 20.3)
 * and on any runtime with `fetch`.
 */

/** A signal that aborts when any of `signals` does (with its reason), or after `timeoutMs`. */
export function linked(
  signals: ReadonlyArray<AbortSignal | undefined>,
  timeoutMs?: number,
): { signal: AbortSignal; done: () => void } {
  const controller = new AbortController();
  const cleanups: Array<() => void> = [];
  const done = () => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  };
  const abort = (reason: unknown) => {
    done();
    controller.abort(reason);
  };
  for (const signal of signals) {
    if (!signal) continue;
    if (signal.aborted) {
      abort(signal.reason);
      return { signal: controller.signal, done };
    }
    const onAbort = () => abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    cleanups.push(() => signal.removeEventListener('abort', onAbort));
  }
  if (timeoutMs !== undefined && Number.isFinite(timeoutMs)) {
    const timer = setTimeout(
      () => abort(new DOMException('the operation timed out', 'TimeoutError')),
      Math.max(0, timeoutMs),
    );
    cleanups.push(() => clearTimeout(timer));
  }
  return { signal: controller.signal, done };
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
