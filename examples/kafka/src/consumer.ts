import type { ResultEnvelope } from '@requester/client';
import { readResults } from '@requester/client/kafka';
import type { Consumer } from 'kafkajs';

/**
 * Reads the results of `requestIds` from `out` (any order), until it has them all or the signal
 * ends the wait. The results of other requests on `out` are skipped.
 */
export async function collectResults(
  consumer: Consumer,
  requestIds: readonly string[],
  options: { topic?: string; signal?: AbortSignal } = {},
): Promise<Map<string, ResultEnvelope>> {
  const results = new Map<string, ResultEnvelope>();
  for await (const { result } of readResults(consumer, {
    topic: options.topic ?? 'requester.out',
    requestIds,
    fromBeginning: true,
    ...(options.signal ? { signal: options.signal } : {}),
  })) {
    if (result.meta.requestId) results.set(result.meta.requestId, result);
    if (results.size === requestIds.length) break;
  }
  return results;
}
