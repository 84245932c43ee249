import { type Producer, produce, withTimeout } from '@requester/shared';
import type { Submit } from '../api/index.ts';

/**
 * How the ingress writes an accepted envelope to `in`: acks from every in-sync replica, and the
 * whole step (getting a connected producer included) bounded by `timeoutMs`, so an unreachable
 * broker turns into a prompt 503 instead of a hung caller.
 *
 * A timeout does not cancel a send kafkajs already has in flight: in the worst case a request
 * answered 503 is still written, and the caller's retry (same requestId) is a duplicate that the
 * router's dedup absorbs. The reverse, a 202 for a request that was not written, cannot happen.
 */
export function kafkaSubmit(producer: () => Promise<Producer>, topic: string, timeoutMs: number): Submit {
  return async (key, value) => {
    // The header tells the router that this request's journal began here (`accepted` over http).
    const headers = { 'requester-channel': 'http' };
    const send = producer().then((p) => produce(p, topic, [{ key, value, headers }], timeoutMs));
    send.catch(() => {}); // a late rejection after the timeout already answered is not unhandled
    await withTimeout(send, timeoutMs, `produce to ${topic} timed out after ${timeoutMs} ms`);
  };
}
