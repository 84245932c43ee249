/**
 * Coalesces single calls into batch calls: every call made within one turn of the event loop
 * (until the next `setImmediate`) goes out in one `runMany`, whose answers come back in order.
 * The tasks of a lease batch reach the limiter and the breaker together, so each lease batch costs
 * one `takeMany`, one `admitMany` and one `recordMany` while each task's code stays a plain await.
 */
export function batched<I, O>(runMany: (items: I[]) => Promise<readonly O[]>): (item: I) => Promise<O> {
  let waiting: Array<{ item: I; resolve: (value: O) => void; reject: (err: unknown) => void }> = [];
  const flush = () => {
    const batch = waiting;
    waiting = [];
    runMany(batch.map((entry) => entry.item)).then(
      (outputs) => {
        batch.forEach((entry, i) => {
          entry.resolve(outputs[i] as O);
        });
      },
      (err: unknown) => {
        for (const entry of batch) entry.reject(err);
      },
    );
  };
  return (item) =>
    new Promise<O>((resolve, reject) => {
      if (waiting.length === 0) setImmediate(flush);
      waiting.push({ item, resolve, reject });
    });
}
