import type { KafkaProducer, ResultEnvelope } from '@requester/shared';
import { startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  kafkaProducer,
  type ResultCollector,
  type StackEnv,
  stackKey,
  startStackUnderTest,
  stopStackUnderTest,
} from './stack.fixture.ts';

/**
 * Debounce (`meta.debounce`) through a whole Requester, on both doors: of a burst of requests of
 * one key, only the latest is called, with its body; each other one ends with one `debounced`
 * result naming it, uncalled. The delays are long beside the time the burst takes to send, so
 * that a slow box does not split it.
 */
describe('end to end: meta.debounce on HTTP and Kafka entry', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let producer: KafkaProducer;
  let target: Target;
  let results: ResultCollector;
  let key: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    ({ stack, running, results } = await startStackUnderTest());
    producer = await kafkaProducer();
    target = await startTarget();
    key = await stackKey(stack);
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    await target?.close();
    await stopStackUnderTest({ stack, running, results });
  }, 60_000);

  const post = (body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...key.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  /** The burst's results: the last called once with its body, every other one `debounced` by it, uncalled. */
  async function expectOnlyTheLastCalled(burst: string, ids: string[]) {
    const last = ids.at(-1) as string;
    await results.until(() => ids.every((id) => results.byId.has(id)), 90_000, 'every result of the burst');
    const latest: ResultEnvelope = await results.one(last);
    expect(latest.response.status).toBe(200);
    const calls = target.calls.filter((call) => call.path.includes(burst));
    expect(calls).toHaveLength(1);
    expect(calls[0]?.body).toBe(JSON.stringify({ n: ids.length - 1 }));
    for (const id of ids.slice(0, -1)) {
      const result = await results.one(id);
      expect(result.response.status).toBe(409);
      expect(result.meta).toMatchObject({
        tryCount: 0,
        error: { code: 'debounced' },
        debounced: { by: last },
      });
    }
    for (const id of ids) expect(results.byId.get(id)).toHaveLength(1);
  }

  it('HTTP: 100 requests of one key give one call with the last body and 99 debounced results naming it', async () => {
    const burst = uniqueName('burst');
    const ids = Array.from({ length: 100 }, (_, n) => `${burst}-${n}`);
    const send = async (n: number) => {
      const reply = await post({
        request: { uri: `${target.url}/echo?burst=${burst}`, method: 'POST', body: JSON.stringify({ n }) },
        meta: { requestId: ids[n], debounce: { key: burst, delay: '10s' } },
      });
      expect(reply.status).toBe(202);
    };
    // The first 99 at once, then the last once they are accepted: it is the latest to arrive.
    const started = Date.now();
    await Promise.all(ids.slice(0, -1).map((_, n) => send(n)));
    await send(ids.length - 1);
    console.info(`debounce e2e: 100 requests accepted in ${Date.now() - started} ms`);
    await expectOnlyTheLastCalled(burst, ids);
  }, 180_000);

  it('HTTP: debounce on an ordered partition, or with maxWait below delay, is a 400 naming the field', async () => {
    const ordered = await post({
      request: { uri: '' },
      meta: { requestId: uniqueName('ordered'), partition: '!p', debounce: { key: 'k', delay: '1s' } },
    });
    expect(ordered.status).toBe(400);
    expect(await ordered.json()).toMatchObject({ issues: [{ path: 'meta.debounce' }] });
    const short = await post({
      request: { uri: '' },
      meta: { requestId: uniqueName('short'), debounce: { key: 'k', delay: '2s', maxWait: '1s' } },
    });
    expect(short.status).toBe(400);
    expect(await short.json()).toMatchObject({ issues: [{ path: 'meta.debounce.maxWait' }] });
  });

  it('Kafka: records of one key in one batch — the last in offset order is the one called', async () => {
    const burst = uniqueName('k-burst');
    const ids = Array.from({ length: 20 }, (_, n) => `${burst}-${n}`);
    await producer.send(
      stack.config.topicIn,
      ids.map((requestId, n) => ({
        key: burst,
        value: JSON.stringify({
          request: { uri: `${target.url}/echo?burst=${burst}`, method: 'POST', body: JSON.stringify({ n }) },
          meta: { requestId, debounce: { key: burst, delay: '2s' } },
        }),
      })),
    );
    await expectOnlyTheLastCalled(burst, ids);
  }, 120_000);
});
