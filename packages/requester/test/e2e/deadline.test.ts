import type { KafkaProducer, ResultEnvelope } from '@requester/shared';
import { eventually, startTarget, type Target, uniqueName } from '@requester/shared/testing';
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
 * The start-by deadline (`meta.deadline`, docs/architecture.md §4) through a whole Requester, on
 * both doors: refused when already past at acceptance, resolved at acceptance, and a task whose
 * turn (or whose next attempt) comes after it ends with one `expired` result and no call.
 */
describe('end to end: meta.deadline on HTTP and Kafka entry', () => {
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

  /** The head of an ordered partition that hangs at the target until released, and its hold key. */
  const hangingHead = (partition: string) => {
    const hold = uniqueName('hold');
    const requestId = uniqueName('head');
    return {
      hold,
      requestId,
      envelope: { request: { uri: `${target.url}/hold/${hold}` }, meta: { requestId, partition } },
    };
  };

  /** Its task stayed behind the head past its deadline: released, the head answers and it expires uncalled. */
  async function expiresBehind(head: ReturnType<typeof hangingHead>, behind: string, deadline: number) {
    await eventually(() => target.holding(head.hold) > 0, 30_000, 'the head is at the target');
    await eventually(() => Date.now() > deadline, 30_000, 'the deadline passed');
    target.release(head.hold);
    expect((await results.one(head.requestId)).response.status).toBe(200);
    const result: ResultEnvelope = await results.one(behind);
    expect(result.response.status).toBe(504);
    expect(result.meta).toMatchObject({ tryCount: 0, error: { code: 'expired' } });
    expect(target.calls.filter((call) => call.path.includes(behind))).toEqual([]);
    expect(results.byId.get(behind)).toHaveLength(1);
  }

  it('HTTP: a deadline already past, or before scheduled, is a 400 naming the field', async () => {
    const past = await post({
      request: { uri: '' },
      meta: { requestId: uniqueName('past'), deadline: '2020-01-01T00:00:00Z' },
    });
    expect(past.status).toBe(400);
    expect(await past.json()).toMatchObject({ issues: [{ path: 'meta.deadline' }] });
    const scheduled = new Date(Date.now() + 3_600_000).toISOString();
    const late = await post({
      request: { uri: '' },
      meta: { requestId: uniqueName('late'), scheduled, deadline: '1m' },
    });
    expect(late.status).toBe(400);
    expect(await late.json()).toMatchObject({ issues: [{ path: 'meta.scheduled' }] });
  });

  it('HTTP: a duration counts from acceptance; the task behind a hanging head expires uncalled', async () => {
    const partition = `!${uniqueName('dl-http')}`;
    const head = hangingHead(partition);
    const behind = uniqueName('behind');
    expect((await post(head.envelope)).status).toBe(202);
    const reply = await post({
      request: { uri: `${target.url}/echo?id=${behind}` },
      meta: { requestId: behind, partition, deadline: '500ms' },
    });
    expect(reply.status).toBe(202);
    // Accepted between sentAt and now: its deadline is at the latest 500 ms after now.
    await expiresBehind(head, behind, Date.now() + 500);
  });

  it('HTTP: a retry whose pause would end after the deadline ends expired after its one attempt', async () => {
    const requestId = uniqueName('retried');
    const reply = await post({
      request: { uri: `${target.url}/status/503?id=${requestId}` },
      meta: { requestId, deadline: '1s', retry: { max: 3, delay: '2s', maxDelay: '2s', jitter: 0 } },
    });
    expect(reply.status).toBe(202);
    const result = await results.one(requestId);
    expect(result.response.status).toBe(504);
    expect(result.meta).toMatchObject({ tryCount: 1, error: { code: 'expired' } });
    expect(target.calls.filter((call) => call.path.includes(requestId))).toHaveLength(1);
  });

  it("Kafka: a deadline past at the record's arrival is an invalid_request result; a duration counts from it", async () => {
    const past = uniqueName('k-past');
    await producer.send(stack.config.topicIn, [
      {
        key: past,
        value: JSON.stringify({
          request: { uri: '' },
          meta: { requestId: past, deadline: '2020-01-01T00:00:00Z' },
        }),
      },
    ]);
    const refused = await results.one(past);
    expect(refused.response.status).toBe(400);
    expect(refused.meta.error).toMatchObject({
      code: 'invalid_request',
      issues: [{ path: 'meta.deadline' }],
    });

    const partition = `!${uniqueName('dl-kafka')}`;
    const head = hangingHead(partition);
    const behind = uniqueName('k-behind');
    await producer.send(stack.config.topicIn, [{ key: partition, value: JSON.stringify(head.envelope) }]);
    await eventually(() => target.holding(head.hold) > 0, 30_000, 'the head is at the target');
    await producer.send(stack.config.topicIn, [
      {
        key: partition,
        value: JSON.stringify({
          request: { uri: `${target.url}/echo?id=${behind}` },
          meta: { requestId: behind, partition, deadline: '500ms' },
        }),
      },
    ]);
    // The record's timestamp, its acceptance, is at the latest now.
    await expiresBehind(head, behind, Date.now() + 500);
  });
});
