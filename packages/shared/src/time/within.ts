/** How a promise ended within a time limit: fulfilled, rejected, or still pending when time ran out. */
export type SettledWithin = 'fulfilled' | 'rejected' | 'timeout';

/** Waits for `step` at most `ms`; the timer is cleared as soon as it settles, so it holds no process open. */
export async function settledWithin(step: Promise<unknown>, ms: number): Promise<SettledWithin> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([
      step.then(
        () => 'fulfilled' as const,
        () => 'rejected' as const,
      ),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
