import { envelope, ordered, proxyData, wakeUp } from '@requester/client';
import { sendRequest } from '@requester/client/kafka';
import type { Producer } from 'kafkajs';

/**
 * Writes requests straight to Requester's `in` topic: wake-ups (an alarm clock: no HTTP call, the
 * payload comes back at the time asked) and calls of one ordered partition, which Requester runs
 * one at a time in the order written. Resolves to the requestIds, to be matched on `out`.
 */
export async function produceRequests(
  producer: Producer,
  options: { topic?: string; targetUrl?: string; count?: number } = {},
): Promise<string[]> {
  const count = options.count ?? 3;
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const request = options.targetUrl
      ? envelope(
          { uri: `${options.targetUrl}/steps/${i}`, method: 'POST' },
          ordered('example-job'),
          proxyData({ step: i }),
        )
      : wakeUp(new Date(), { body: `step ${i}`, proxyData: { step: i } });
    ids.push(await sendRequest(producer, request, { topic: options.topic ?? 'requester.in' }));
  }
  return ids;
}
