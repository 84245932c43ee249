import { silentLogger, testKafka, uniqueName } from '@requester/shared/testing';
import { Router, type RouterOptions } from './index.ts';

/**
 * A router as the router tests run it: a consumer of a Kafka group of its own (`groupId`, or a
 * fresh one), a 1 s Redis horizon, a 5 s produce timeout, no log; the rest (its queue, outbox,
 * producer and topics, backpressure…) is the test's. Not started: `await router.start()`.
 */
export function testRouter(
  options: Omit<RouterOptions, 'consumer' | 'horizonMs' | 'produceTimeoutMs' | 'logger'> &
    Partial<Pick<RouterOptions, 'consumer' | 'horizonMs' | 'produceTimeoutMs' | 'logger'>> & {
      groupId?: string;
    },
): Router {
  const { groupId, ...rest } = options;
  return new Router({
    consumer: testKafka().consumer({ groupId: groupId ?? uniqueName('router') }),
    horizonMs: 1_000,
    produceTimeoutMs: 5_000,
    logger: silentLogger,
    ...rest,
  });
}
