import type { KafkaProducer, OutgoingRecord } from '@requester/shared/kafka';
import { createTestTopics, eventually, readTopic, testKafka, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silent } from '../../test/kit.fixture.ts';
import { createApi, type Submit } from '../api/index.ts';
import { openAccess } from '../auth/index.ts';
import { kafkaSubmit } from './index.ts';

/**
 * A real producer whose sends are counted, and can be held (`hold`) or made to fail (`failNext`)
 * before they reach the broker: what the ingress's batching does is seen in the produce calls.
 */
class CountingProducer {
  readonly calls: OutgoingRecord[][] = [];
  private gate: Promise<void> | undefined;
  private open: (() => void) | undefined;
  private failures = 0;
  readonly real: KafkaProducer = testKafka().producer();

  hold(): void {
    this.gate = new Promise((resolve) => {
      this.open = resolve;
    });
  }

  release(): void {
    this.open?.();
    this.gate = undefined;
  }

  failNext(): void {
    this.failures++;
  }

  readonly producer: KafkaProducer = {
    connect: () => this.real.connect(),
    disconnect: () => this.real.disconnect(),
    partitionCount: (topic) => this.real.partitionCount(topic),
    send: async (topic, records, timeoutMs, options) => {
      this.calls.push(records);
      const failing = this.failures > 0;
      if (failing) this.failures--;
      await this.gate;
      if (failing) throw new Error('broker said no');
      return this.real.send(topic, records, timeoutMs, options);
    },
  };
}

const settledState = (promise: unknown) => {
  const state = { settled: false as boolean | 'ok' | 'failed' };
  Promise.resolve(promise).then(
    () => {
      state.settled = 'ok';
    },
    () => {
      state.settled = 'failed';
    },
  );
  return state;
};

const tick = () => new Promise((resolve) => setTimeout(resolve, 50));

const api = (submit: Submit) =>
  createApi(
    { submit },
    { maxBodyBytes: 64 * 1024, syncTimeoutMs: 1_000, longPollMaxMs: 1_000, access: openAccess() },
    silent,
  );

const post = (app: ReturnType<typeof api>, id: string) =>
  app.request('/request', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ request: { uri: 'https://example.test/x' }, meta: { requestId: id } }),
  });

describe('kafkaSubmit micro-batching (real Kafka)', { timeout: 60_000 }, () => {
  const topic = `${uniqueName('submit')}.in`;
  const counting = new CountingProducer();
  const producer = () => Promise.resolve(counting.producer);

  beforeAll(async () => {
    await createTestTopics([topic], 3);
    await counting.real.connect();
  });
  afterAll(() => counting.real.disconnect());

  it('a burst of concurrent POSTs goes to Kafka in a few produce requests, every 202 after its ack', async () => {
    counting.calls.length = 0;
    const submit = kafkaSubmit(producer, topic, 10_000, { lingerMs: 20, maxBatchBytes: 1 << 20 });
    const app = api(submit);
    // The first produce is held at the broker's door: everything accepted meanwhile must wait for it.
    counting.hold();
    const prefix = uniqueName('burst');
    const replies = Array.from({ length: 100 }, (_, i) => post(app, `${prefix}-${i}`));
    const states = replies.map(settledState);
    await tick();
    expect(states.every((s) => s.settled === false)).toBe(true); // no 202 before an ack
    counting.release();
    const statuses = await Promise.all(replies.map(async (r) => (await r).status));
    expect(statuses).toEqual(Array(100).fill(202));
    expect(counting.calls.length).toBeLessThanOrEqual(10);
    expect(counting.calls.flat()).toHaveLength(100);
    const written = await readTopic(
      topic,
      (records) => records.filter((r) => r.key?.toString().startsWith(prefix)).length >= 100,
    );
    expect(new Set(written.map((r) => r.key?.toString()).filter((k) => k?.startsWith(prefix))).size).toBe(
      100,
    );
  });

  it('holds callers while a produce is in flight and sends them together; each answered on its own batch ack', async () => {
    counting.calls.length = 0;
    const submit = kafkaSubmit(producer, topic, 10_000, { lingerMs: 20, maxBatchBytes: 1 << 20 });
    counting.hold();
    const first = settledState(submit('alone', '{}'));
    await eventually(() => counting.calls.length === 1, 5_000, 'first produce'); // held at the broker's door
    const later = Array.from({ length: 10 }, (_, i) => submit(`later-${i}`, '{}'));
    const laterStates = later.map(settledState);
    // Their linger runs out while the first produce is held: a second batch, held too.
    await eventually(() => counting.calls.length === 2, 5_000, 'second produce');
    expect(counting.calls.map((c) => c.length)).toEqual([1, 10]);
    expect(first.settled).toBe(false);
    expect(laterStates.every((s) => s.settled === false)).toBe(true);
    counting.release();
    await Promise.all(later);
    expect(first.settled).toBe('ok');
  });

  it('a failed produce answers every caller of that batch 503, and only them', async () => {
    counting.calls.length = 0;
    const submit = kafkaSubmit(producer, topic, 10_000, { lingerMs: 500, maxBatchBytes: 1 << 20 });
    const app = api(submit);
    counting.hold();
    const primer = submit(uniqueName('primer'), '{}'); // in flight: whatever comes next lingers
    await eventually(() => counting.calls.length === 1, 5_000, 'first produce');
    counting.failNext();
    const failing = Array.from({ length: 5 }, () => post(app, uniqueName('failing')));
    await eventually(() => counting.calls.length === 2, 5_000, 'the failing batch');
    const healthy = Array.from({ length: 5 }, () => post(app, uniqueName('healthy')));
    await eventually(() => counting.calls.length === 3, 5_000, 'the healthy batch');
    expect(counting.calls.map((c) => c.length)).toEqual([1, 5, 5]);
    counting.release();
    expect(await Promise.all(failing.map(async (r) => (await r).status))).toEqual(Array(5).fill(503));
    expect(await Promise.all(healthy.map(async (r) => (await r).status))).toEqual(Array(5).fill(202));
    await primer;
  });

  it('a batch reaching INGRESS_BATCH_BYTES goes out without waiting for the linger', async () => {
    counting.calls.length = 0;
    const submit = kafkaSubmit(producer, topic, 10_000, { lingerMs: 60_000, maxBatchBytes: 1_000 });
    counting.hold();
    const first = submit('first', '{}');
    await eventually(() => counting.calls.length === 1, 5_000, 'first produce');
    const big = Array.from({ length: 4 }, (_, i) => submit(`big-${i}`, 'x'.repeat(300)));
    await eventually(() => counting.calls.length === 2, 5_000, 'the full batch, long before its linger');
    expect(counting.calls.map((c) => c.length)).toEqual([1, 4]);
    counting.release();
    await Promise.all([first, ...big]);
  });
});
