import type { KafkaProducer } from '@requester/shared/kafka';
import { Outbox } from '@requester/shared/outbox';
import { decodeQueuedTask } from '@requester/shared/task';
import {
  createTestTopics,
  eventually,
  SPAN_KIND,
  startTraceCollector,
  type TraceCollector,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { initTracing, shutdownTracing } from '@requester/shared/tracing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Router } from './index.ts';
import type { QueueTask } from './route.ts';
import { testRouter } from './router.fixture.ts';

/**
 * A direct producer on `in` (no ingress) traces its request with a Kafka record header
 * `traceparent`: the router's CONSUMER span is its child, and the queued task carries the router
 * span on to the executor. A `meta.traceparent` in the body loses to the header.
 */
describe('router tracing', () => {
  const name = uniqueName('router-trace');
  const topicIn = `${name}.in`;
  const topicOut = `${name}.out`;
  const queued: QueueTask[] = [];
  let collector: TraceCollector;
  let pg: Awaited<ReturnType<typeof testPg>>;
  let producer: KafkaProducer;
  let router: Router;

  beforeAll(async () => {
    collector = await startTraceCollector();
    await initTracing('router-trace-test', collector.url);
    await createTestTopics([topicIn, topicOut], 1);
    pg = await testPg();
    producer = testKafka().producer();
    await producer.connect();
    router = testRouter({
      queue: { publish: async (tasks) => queued.push(...tasks) },
      outbox: new Outbox(pg.sql),
      producer,
      topicIn,
      topicOut,
    });
    await router.start();
  }, 60_000);

  afterAll(async () => {
    await router?.stop();
    await producer?.disconnect();
    await shutdownTracing();
    await collector?.close();
    await pg?.drop();
  }, 60_000);

  it("continues the trace of a record's traceparent header", async () => {
    const traceId = '5'.repeat(32);
    const producerSpanId = '6'.repeat(16);
    const request = {
      request: { uri: 'https://example.com/x' },
      // Another trace in the body: the header (the producer's own instrumentation) wins.
      meta: { requestId: 'direct-1', traceparent: `00-${'7'.repeat(32)}-${'8'.repeat(16)}-01` },
    };
    await producer.send(topicIn, [
      {
        key: 'direct-1',
        value: JSON.stringify(request),
        headers: { traceparent: `00-${traceId}-${producerSpanId}-01` },
      },
    ]);
    await eventually(async () => queued.length === 1, 30_000, 'the task in the queue');
    await shutdownTracing(); // flushes the batch of spans
    const [span] = collector.spans.filter((s) => s.kind === SPAN_KIND.consumer);
    expect(span).toMatchObject({ traceId, parentSpanId: producerSpanId, name: `process ${topicIn}` });
    expect(span?.attributes['requester.request_id']).toBe('direct-1');
    const task = decodeQueuedTask((queued[0] as QueueTask).payload);
    expect(task.traceparent).toBe(`00-${traceId}-${span?.spanId}-01`);
  }, 60_000);
});
