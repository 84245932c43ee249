import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

/**
 * kafkajs's per-connection request queue as patches/kafkajs@2.2.4.patch leaves it. Unpatched, every
 * response scheduled a check of the pending requests even when none was pending, at
 * `throttledUntil - Date.now()` = −Date.now() − 1 before any throttling: Node clamped it to 1 ms
 * and printed a TimeoutNegativeWarning at every start, and each check scheduled the next, so each
 * connection woke the event loop every millisecond for as long as it lived.
 */

interface SocketRequest {
  correlationId: number;
}
interface RequestQueue {
  pending: SocketRequest[];
  inflight: Map<number, SocketRequest>;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  push(request: { entry: { correlationId: number }; expectResponse: boolean; sendRequest: () => void }): void;
  fulfillRequest(response: { correlationId: number; payload: Buffer; size: number }): void;
  maybeThrottle(clientSideThrottleTime: number): void;
  destroy(): void;
}

const require = createRequire(import.meta.url);
const RequestQueue = require('kafkajs/src/network/requestQueue') as new (options: object) => RequestQueue;

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const queueOf = (maxInFlightRequests: number | null) =>
  new RequestQueue({
    maxInFlightRequests,
    requestTimeout: 30_000,
    enforceRequestTimeout: false,
    clientId: 'test',
    broker: 'localhost:9092',
    logger: silent,
  });

/** Pushes a request whose `send` is recorded in `sent`; resolves nothing (the test fulfils it). */
function push(queue: RequestQueue, correlationId: number, sent: number[]): void {
  queue.push({
    entry: { correlationId, resolve() {}, reject() {} } as { correlationId: number },
    expectResponse: true,
    sendRequest: () => sent.push(correlationId),
  });
}

const answer = (correlationId: number) => ({ correlationId, payload: Buffer.alloc(0), size: 0 });

describe('kafkajs request queue (patched)', () => {
  it('schedules no check once a response leaves nothing pending', () => {
    const queue = queueOf(null);
    const sent: number[] = [];
    push(queue, 1, sent);
    expect(sent).toEqual([1]);
    queue.fulfillRequest(answer(1));
    expect(queue.inflight.size).toBe(0);
    expect(queue.throttleCheckTimeoutId).toBeNull();
    queue.destroy();
  });

  it('still sends a request held by the in-flight limit when a response frees a slot', async () => {
    const queue = queueOf(1);
    const sent: number[] = [];
    push(queue, 1, sent);
    push(queue, 2, sent);
    expect(sent).toEqual([1]);
    queue.fulfillRequest(answer(1));
    expect(sent).toEqual([1, 2]);
    queue.fulfillRequest(answer(2));
    // The check scheduled while 2 was pending runs once and schedules no other.
    await expect.poll(() => queue.throttleCheckTimeoutId, { timeout: 5_000 }).toBeNull();
    queue.destroy();
  });

  it('still sends a request held by client-side throttling once the throttle is over', async () => {
    const queue = queueOf(null);
    const sent: number[] = [];
    queue.maybeThrottle(20);
    push(queue, 1, sent);
    expect(sent).toEqual([]);
    expect(queue.throttleCheckTimeoutId).not.toBeNull();
    await expect.poll(() => sent, { timeout: 5_000 }).toEqual([1]);
    queue.fulfillRequest(answer(1));
    expect(queue.throttleCheckTimeoutId).toBeNull();
    queue.destroy();
  });
});
