import { RateLimiter } from '@requester/policies';
import { type FairQueue, QueueAdmin, queueFromConfig } from '@requester/queue';
import { loadConfig } from '@requester/shared/config';
import { parseAnyDeadLetter } from '@requester/shared/contract';
import type { JournalEventInput } from '@requester/shared/journal';
import { registry } from '@requester/shared/metrics';
import { Dependencies } from '@requester/shared/role';
import { encodeQueuedTask, taskId } from '@requester/shared/task';
import {
  createTestTopics,
  silentLogger,
  startTarget,
  TEST_DATABASE_URL,
  TEST_KAFKA_BROKERS,
  testKafka,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConcurrency } from '../concurrency/index.ts';
import { createHttpClient } from '../http/index.ts';
import { idempotencyKey } from '../http/request.ts';
import { executorRole } from '../index.ts';
import { ExecutorHarness } from './harness.fixture.ts';
import { Executor, HELD_PER_WORKER, WAKE_UPS_HELD } from './index.ts';

/**
 * The executor end to end over the real Kafka and Redis and a real HTTP target (see
 * ExecutorHarness): the pipeline itself. The delivery policies are tested in policies.test.ts.
 */
describe('executor (end to end)', () => {
  const h = new ExecutorHarness();
  const { inTopic, outTopic, results } = h;
  const resultOf = (requestId: string) => h.resultOf(requestId);
  const submit: ExecutorHarness['submit'] = (...args) => h.submit(...args);
  const submitRaw: ExecutorHarness['submitRaw'] = (...args) => h.submitRaw(...args);
  const startExecutor: ExecutorHarness['startExecutor'] = (...args) => h.startExecutor(...args);

  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);
  // Made before any test runs: a Lua command defined while ioredis auto-pipelines is missing from that pipeline.
  let limiter: RateLimiter;
  beforeAll(() => {
    limiter = new RateLimiter({ redis: h.redis, prefix: h.prefix('lim') });
  });

  describe('through the executor role', () => {
    let queue: FairQueue;
    let handle: Awaited<ReturnType<typeof executorRole.start>>;
    let deps: Dependencies;
    /** Plays this Requester's own HTTP API: HTTP_PORT is its port. */
    let ownApi: Awaited<ReturnType<typeof startTarget>>;

    beforeAll(async () => {
      ownApi = await startTarget();
      h.onClose(() => ownApi.close());
      const config = loadConfig({
        HTTP_PORT: new URL(ownApi.url).port,
        KAFKA_BROKERS: TEST_KAFKA_BROKERS,
        KAFKA_TOPIC_IN: inTopic,
        KAFKA_TOPIC_OUT: outTopic,
        KAFKA_TOPIC_DLQ: h.dlqTopic,
        KAFKA_CREATE_TOPICS: 'false',
        EVENTS: 'off', // no events topic here (KAFKA_CREATE_TOPICS=false)
        DATABASE_URL: TEST_DATABASE_URL,
        REDIS_PREFIX: uniqueName('ex'),
        QUEUE_SHARDS: '8',
        MAX_WORKERS: '8',
        ALLOW_PRIVATE_TARGETS: '127.0.0.1',
        TARGET_RESPONSE_TIMEOUT: '500ms',
        LOG_LEVEL: 'silent',
      });
      deps = new Dependencies(config, silentLogger);
      handle = await executorRole.start({ config, logger: silentLogger, deps });
      queue = queueFromConfig(config, h.redis); // the role's queue, seen from the router's side
      h.onClose(async () => {
        await handle.drain();
        await deps.close();
        await new QueueAdmin(queue).purge();
        await queue.close();
      });
    });

    it('delivers the target answer: status, body, headers, echoed proxyData, meta', async () => {
      const requestId = uniqueName('ok');
      const proxyData = { service: 'billing', nested: { n: [1, 2] } };
      await submit(queue, [
        {
          request: {
            uri: `${h.target.url}/echo?id=${requestId}`,
            method: 'POST',
            body: '{"id":42}',
            headers: { 'content-type': 'application/json', 'x-caller': 'test' },
          },
          meta: { requestId, proxyData },
        },
      ]);
      const result = await resultOf(requestId);
      expect(result.response).toMatchObject({ status: 200, body: '{"id":42}' });
      expect(result.response.headers['x-target']).toBe('test');
      expect(result.meta).toMatchObject({ requestId, tryCount: 1, cached: false, waitTime: 0, proxyData });
      expect(result.meta.error).toBeUndefined();
      expect(Number.isInteger(result.meta.time) && result.meta.time > 0).toBe(true);

      const call = h.target.calls.find((c) => c.path.includes(requestId));
      expect(call?.method).toBe('POST');
      expect(call?.headers['x-caller']).toBe('test');
      expect(call?.headers['idempotency-key']).toBe(idempotencyKey(requestId));
    });

    it('keeps an Idempotency-Key the caller set', async () => {
      const requestId = uniqueName('idem');
      await submit(queue, [
        {
          request: { uri: `${h.target.url}/echo?id=${requestId}`, headers: { 'Idempotency-Key': 'mine' } },
          meta: { requestId },
        },
      ]);
      expect((await resultOf(requestId)).response.status).toBe(200);
      expect(h.target.calls.find((c) => c.path.includes(requestId))?.headers['idempotency-key']).toBe('mine');
    });

    it('answers a wake-up with a synthetic 200 carrying its body and headers, calling nobody', async () => {
      const requestId = uniqueName('wake');
      await submit(queue, [
        {
          request: { uri: '', body: 'ring', headers: { 'x-alarm': 'on' } },
          meta: { requestId, proxyData: { alarm: true } },
        },
      ]);
      const result = await resultOf(requestId);
      expect(result.response).toEqual({ status: 200, body: 'ring', headers: { 'x-alarm': 'on' } });
      expect(result.meta).toMatchObject({ requestId, tryCount: 1, proxyData: { alarm: true } });
      expect(h.target.calls.some((c) => c.path.includes(requestId))).toBe(false);
    });

    it('answers a refused connection with 502 and meta.error', async () => {
      const requestId = uniqueName('refused');
      const gone = await startTarget();
      await gone.close();
      await submit(queue, [{ request: { uri: `${gone.url}/echo` }, meta: { requestId, proxyData: 'p' } }]);
      const result = await resultOf(requestId);
      expect(result.response.status).toBe(502);
      expect(result.meta.error?.code).toBe('transport_error');
      expect(result.meta.error?.message).toMatch(/ECONNREFUSED/);
      expect(result.meta).toMatchObject({ tryCount: 1, proxyData: 'p' });
    });

    it('answers a target slower than the response timeout with 504 and meta.error', async () => {
      const requestId = uniqueName('slow');
      await submit(queue, [
        { request: { uri: `${h.target.url}/slow/5000?id=${requestId}` }, meta: { requestId } },
      ]);
      const result = await resultOf(requestId);
      expect(result.response.status).toBe(504);
      expect(result.meta.error).toEqual({ code: 'timeout', message: 'target did not answer within 500 ms' });
    });

    it('refuses its own HTTP port though ALLOW_PRIVATE_TARGETS=127.0.0.1 allows loopback; other local ports work', async () => {
      const loop = uniqueName('loop');
      const byName = uniqueName('loop-name');
      const fine = uniqueName('fine');
      const ownPort = new URL(ownApi.url).port;
      await submit(queue, [
        { request: { uri: `${ownApi.url}/request?id=${loop}` }, meta: { requestId: loop } },
        { request: { uri: `http://localhost:${ownPort}/request?id=${byName}` }, meta: { requestId: byName } },
        { request: { uri: `${h.target.url}/echo?id=${fine}` }, meta: { requestId: fine } },
      ]);
      for (const requestId of [loop, byName]) {
        const result = await resultOf(requestId);
        expect(result.response.status).toBe(502);
        expect(result.meta.error?.code).toBe('target_refused');
        expect(result.meta.error?.message).toMatch(/Requester's own \(HTTP_PORT\)/);
      }
      expect(ownApi.calls).toHaveLength(0);
      expect((await resultOf(fine)).response.status).toBe(200);
    });

    it('answers invalid records with 400 invalid_request, keyed by the requestId, with their offset, and dead-letters them', async () => {
      const notJson = uniqueName('not-json');
      const badSchema = uniqueName('bad-schema');
      await submitRaw(queue, [
        { requestId: notJson, value: '{not json' },
        {
          requestId: badSchema,
          value: JSON.stringify({ request: { uri: 'ftp://x' }, meta: { requestId: badSchema } }),
        },
      ]);
      const [a, b] = await Promise.all([resultOf(notJson), resultOf(badSchema)]);
      expect(a.response.status).toBe(400);
      expect(a.meta.error?.code).toBe('invalid_request');
      expect(b.response.status).toBe(400);
      expect(b.meta.error?.issues?.[0]?.path).toBe('request.uri');
      expect(a.meta.error?.source).toMatchObject({
        topic: h.inTopic,
        offset: expect.stringMatching(/^\d+$/),
      });
      const [letter] = await h.until(() => h.deadLetters.get(notJson));
      const dead = parseAnyDeadLetter(letter?.value);
      expect(dead).toMatchObject({ reason: 'unprocessable', source: a.meta.error?.source });
      expect(Buffer.from(dead.record?.value ?? '', 'base64').toString()).toBe('{not json');
    });

    it('answers a task whose in-record is gone with an error result, never silence', async () => {
      const missing = uniqueName('missing');
      await submitRaw(queue, [{ requestId: missing, value: '{}' }], 1_000); // ref far past the end
      const result = await resultOf(missing);
      expect(result.response.status).toBe(500);
      expect(result.meta.error?.code).toBe('not_found');

      const expired = uniqueName('expired');
      const topic = uniqueName('ex-expired');
      await createTestTopics([topic], 1);
      await h.producer.send(topic, [{ value: 'old' }, { value: 'new' }]);
      const admin = testKafka().admin();
      await admin.connect();
      await admin.deleteRecordsBefore(topic, 0, '1'); // as retention would
      await admin.disconnect();
      await queue.publish([
        {
          id: taskId(undefined, expired, 0),
          payload: encodeQueuedTask({
            ref: { topic, partition: 0, offset: '0' },
            requestId: expired,
            tryCount: 0,
          }),
        },
      ]);
      const gone = await resultOf(expired);
      expect(gone.response.status).toBe(500);
      expect(gone.meta.error?.code).toBe('record_expired');
    });
  });

  describe('inline tasks (a small in-record carried in the task)', () => {
    /** The harness's fetcher, counting the refs it is asked to read. */
    function countingFetcher() {
      const fetcher = testKafka().fetcher();
      const counted = { refs: 0 };
      const fetchMany: typeof fetcher.fetchMany = (refs) => {
        counted.refs += refs.length;
        return fetcher.fetchMany(refs);
      };
      return {
        counted,
        fetcher: { ...fetcher, fetchMany, fetch: fetcher.fetch.bind(fetcher), close: () => fetcher.close() },
      };
    }

    it('runs from the task alone: nothing is read from Kafka', async () => {
      const { counted, fetcher } = countingFetcher();
      const { queue } = startExecutor({ fetcher });
      const requestId = uniqueName('inline');
      const value = JSON.stringify({
        request: { uri: `${h.target.url}/echo`, body: 'carried' },
        meta: { requestId },
      });
      const headers = { 'requester-reply-to': 'gateway-x' };
      await submitRaw(queue, [{ requestId, value, headers, inline: { value: JSON.parse(value), headers } }]);
      const result = await resultOf(requestId);
      expect(result.response).toMatchObject({ status: 200, body: 'carried' });
      expect(counted.refs).toBe(0);
    });

    it('takes an inline copy the router marked as checked as it is: the contract is not run again', async () => {
      const { counted, fetcher } = countingFetcher();
      const { queue } = startExecutor({ fetcher });
      const requestId = uniqueName('inline-checked');
      const value = JSON.stringify({
        request: { uri: `${h.target.url}/echo`, body: 'from kafka' },
        meta: { requestId },
      });
      // A copy the contract would refuse (retry.max < 0), marked checked: run from the task as it
      // is; unmarked, it would be read back from Kafka (the test below).
      const copy = {
        request: { uri: `${h.target.url}/echo`, method: 'POST', body: 'as checked' },
        meta: { requestId, retry: { max: -1 } },
      };
      await submitRaw(queue, [{ requestId, value, inline: { value: copy, checked: true } }]);
      const result = await resultOf(requestId);
      expect(result.response).toMatchObject({ status: 200, body: 'as checked' });
      expect(counted.refs).toBe(0);
    });

    it('validates a copy marked checked that is not shaped like a request (read back from Kafka)', async () => {
      const { counted, fetcher } = countingFetcher();
      const { queue } = startExecutor({ fetcher });
      const requestId = uniqueName('inline-checked-bad');
      const value = JSON.stringify({
        request: { uri: `${h.target.url}/echo`, body: 'from kafka' },
        meta: { requestId },
      });
      await submitRaw(queue, [{ requestId, value, inline: { value: { not: 'a request' }, checked: true } }]);
      const result = await resultOf(requestId);
      expect(result.response).toMatchObject({ status: 200, body: 'from kafka' });
      expect(counted.refs).toBe(1);
    });

    it('reads the record back from Kafka when the inline copy is not a request it can parse', async () => {
      const { counted, fetcher } = countingFetcher();
      const { queue } = startExecutor({ fetcher });
      const requestId = uniqueName('inline-bad');
      const value = JSON.stringify({
        request: { uri: `${h.target.url}/echo`, body: 'from kafka' },
        meta: { requestId },
      });
      await submitRaw(queue, [{ requestId, value, inline: { value: { not: 'a request' } } }]);
      const result = await resultOf(requestId);
      expect(result.response).toMatchObject({ status: 200, body: 'from kafka' });
      expect(counted.refs).toBe(1);
    });
  });

  it('refuses a private target when not allowed: 502 target_refused, and the target never sees it', async () => {
    const { queue } = startExecutor({ allow: [] });
    const requestId = uniqueName('ssrf');
    await submit(queue, [{ request: { uri: `${h.target.url}/echo?id=${requestId}` }, meta: { requestId } }]);
    const result = await resultOf(requestId);
    expect(result.response.status).toBe(502);
    expect(result.meta.error?.code).toBe('target_refused');
    expect(h.target.calls.some((c) => c.path.includes(requestId))).toBe(false);
  });

  // The harness's out topic has the broker's default max.message.bytes (1048588). A 700 kB body of
  // quotes is 1.4 MB once JSON-escaped: the broker would refuse that record for good.
  it.each([
    ['KAFKA_MAX_MESSAGE_BYTES says so', 1_048_588],
    ['the broker refuses it (the topic allows less than configured)', 10_485_760],
  ])(
    'answers a result too large for out with 502 payload_too_large when %s; its batch still goes out',
    async (_, maxResultBytes) => {
      const { queue } = startExecutor({ maxResultBytes });
      const big = uniqueName('big');
      const small = uniqueName('small');
      await submit(queue, [
        { request: { uri: `${h.target.url}/quotes/700000` }, meta: { requestId: big, proxyData: { n: 1 } } },
        { request: { uri: `${h.target.url}/echo`, body: 'fine' }, meta: { requestId: small } },
      ]);
      const tooLarge = await resultOf(big);
      expect(tooLarge.response).toMatchObject({ status: 502, body: '' });
      expect(tooLarge.meta).toMatchObject({ tryCount: 1, proxyData: { n: 1 } });
      expect(tooLarge.meta.error?.code).toBe('payload_too_large');
      expect(tooLarge.meta.error?.message).toContain('target status 200');
      expect((await resultOf(small)).response).toMatchObject({ status: 200, body: 'fine' });
    },
  );

  it('leases wake-ups beyond its workers and their 4 leases each, from a budget of their own', async () => {
    const queue = h.newQueue();
    const asked = leasesAsked(queue);
    const run = uniqueName('wakes');
    const wakeUps = Array.from({ length: 200 }, (_, i) => ({
      request: { uri: '', body: `w${i}` },
      meta: { requestId: `${run}-${i}` },
    }));
    await submit(queue, wakeUps);
    startExecutor({ queue, maxWorkers: 2 });
    const answered = await Promise.all(wakeUps.map((w) => resultOf(w.meta.requestId)));
    expect(answered.map((r) => r.response.status)).toEqual(wakeUps.map(() => 200));
    expect(asked[0]).toBe(2); // nothing known yet: one task per worker
    // Before the wake-ups' own budget, at most HELD_PER_WORKER × 2 = 8 leases were held.
    expect(Math.max(...asked)).toBeGreaterThan(HELD_PER_WORKER * 2);
    expect(Math.max(...asked)).toBeLessThanOrEqual(WAKE_UPS_HELD);
  });

  it("journals a wake-up's lease with its result: leased then completed, emitted together", async () => {
    const queue = h.newQueue();
    const run = uniqueName('wjournal');
    const wakeUps = Array.from({ length: 20 }, (_, i) => ({
      request: { uri: '', body: `w${i}` },
      meta: { requestId: `${run}-${i}` },
    }));
    await submit(queue, wakeUps);
    const events: JournalEventInput[] = [];
    const journal = { emit: (event: JournalEventInput) => void events.push(event), close: async () => {} };
    startExecutor({ queue, maxWorkers: 4, journal });
    await Promise.all(wakeUps.map((w) => resultOf(w.meta.requestId)));
    await h.until(() => (events.filter((e) => e.type === 'completed').length >= 20 ? true : undefined));
    // One journal record per request and flush: a `leased` emitted with its `completed` shares it
    // (before, the lease batch's `leased` events all came first, most flushed apart).
    for (const [i, event] of events.entries()) {
      if (event.type !== 'leased') continue;
      const next = events[i + 1];
      expect(next).toMatchObject({ type: 'completed', requestId: event.requestId });
      expect(event.at).toBeTypeOf('number'); // the lease's time, not the flush's
    }
    expect(events.filter((e) => e.type === 'leased')).toHaveLength(20);
  });

  it('journals what decided when a task ran in its leased event: priority, concurrency key, debounce key', async () => {
    const queue = h.newQueue();
    const run = uniqueName('why');
    const call = (name: string, meta: Record<string, unknown>) => ({
      request: { uri: `${h.target.url}/status/200?run=${run}` },
      meta: { requestId: `${run}-${name}`, ...meta },
    });
    const envelopes = [
      call('plain', {}),
      call('prio', { priority: -3 }),
      call('conc', { concurrency: { key: `${run}-k`, limit: 2 } }),
      call('deb', { debounce: { key: `${run}-d`, delay: '1ms' } }),
    ];
    await submit(queue, envelopes);
    const events: JournalEventInput[] = [];
    const journal = { emit: (event: JournalEventInput) => void events.push(event), close: async () => {} };
    const concurrency = new KeyConcurrency({ redis: h.redis, prefix: h.prefix('why'), leaseMs: 30_000 });
    startExecutor({ queue, maxWorkers: 4, journal, concurrency });
    await Promise.all(envelopes.map((e) => resultOf(e.meta.requestId)));
    const leased = Object.fromEntries(
      events.filter((e) => e.type === 'leased').map((e) => [e.requestId.slice(run.length + 1), e]),
    );
    const why = ({ priority, concurrencyKey, debounceKey }: Record<string, unknown>) => ({
      priority,
      concurrencyKey,
      debounceKey,
    });
    expect(why(leased.plain ?? {})).toEqual({});
    expect(Object.keys(leased.plain ?? {})).not.toContain('priority'); // absent, not undefined-valued
    expect(why(leased.prio ?? {})).toMatchObject({ priority: -3 });
    expect(why(leased.conc ?? {})).toMatchObject({ concurrencyKey: `${run}-k` });
    expect(why(leased.deb ?? {})).toMatchObject({ debounceKey: `${run}-d` });
  });

  it('gives back unattempted the calls a lease sized for wake-ups brings beyond its workers', async () => {
    const queue = h.newQueue();
    const asked = leasesAsked(queue);
    const run = uniqueName('mixed');
    const wakeUps = Array.from({ length: 300 }, (_, i) => ({
      request: { uri: '', body: `w${i}` },
      meta: { requestId: `${run}-w${i}` },
    }));
    const calls = Array.from({ length: 40 }, (_, i) => ({
      request: { uri: `${h.target.url}/echo/${run}-c${i}`, body: `c${i}` },
      meta: { requestId: `${run}-c${i}` },
    }));
    const givenBack = async () => {
      const found = registry.getSingleMetric('requester_executor_tasks_total');
      const values = found ? (await found.get()).values : [];
      return values.find((v) => v.labels.outcome === 'given_back')?.value ?? 0;
    };
    const before = await givenBack();
    await submit(queue, wakeUps);
    await submit(queue, calls);
    startExecutor({ queue, maxWorkers: 1 });
    const answered = await Promise.all([...wakeUps, ...calls].map((r) => resultOf(r.meta.requestId)));
    expect(answered.every((r) => r.response.status === 200)).toBe(true);
    // Leases sized for wake-ups brought calls too; each call was still attempted once.
    expect(Math.max(...asked)).toBeGreaterThan(HELD_PER_WORKER);
    expect(answered.slice(wakeUps.length).map((r) => r.meta.tryCount)).toEqual(calls.map(() => 1));
    expect(h.callsWith(run)).toHaveLength(calls.length);
    expect(await givenBack()).toBeGreaterThan(before);
  });

  it('keeps an ordered partition in order with 8 workers and random target delays', async () => {
    const { queue } = startExecutor({ maxWorkers: 8 });
    const run = uniqueName('ord');
    const ordered = Array.from({ length: 50 }, (_, i) => ({
      request: { uri: `${h.target.url}/random-delay/30?run=${run}&seq=${i}` },
      meta: { requestId: `${run}-${i}`, partition: `!${run}` },
    }));
    // Unordered neighbours keep the other workers busy meanwhile.
    const loose = Array.from({ length: 30 }, (_, i) => ({
      request: { uri: `${h.target.url}/random-delay/30?run=${run}-loose&seq=${i}` },
      meta: { requestId: `${run}-loose-${i}` },
    }));
    await submit(queue, [...ordered, ...loose]);
    await Promise.all([...ordered, ...loose].map((e) => resultOf(e.meta.requestId)));

    const seen = h.target.calls
      .filter((c) => c.path.includes(`run=${run}&`))
      .map((c) => Number(new URL(c.path, 'http://x').searchParams.get('seq')));
    expect(seen).toEqual(ordered.map((_, i) => i));
    for (const e of ordered) expect(results.get(e.meta.requestId)).toHaveLength(1);
  });

  it('keeps the lease of a call longer than the lease TTL (heartbeats): one call, one result', async () => {
    // A lease of 1.5 s, heartbeats every third of it, a call of 5 s (over three lifetimes): the
    // heartbeat may be a second late (a loaded box stalls that long) without the lease lapsing.
    const first = startExecutor({ leaseTtlMs: 1_500 });
    startExecutor({ leaseTtlMs: 1_500, queue: first.queue }); // would reclaim a lapsed lease and call again
    const requestId = uniqueName('long');
    await submit(first.queue, [
      { request: { uri: `${h.target.url}/slow/5000?id=${requestId}` }, meta: { requestId } },
    ]);
    expect((await resultOf(requestId)).response.status).toBe(200);
    await first.stop();
    expect(h.target.calls.filter((c) => c.path.includes(requestId))).toHaveLength(1);
    expect(results.get(requestId)).toHaveLength(1);
  });

  it('drains: the calls in hand end on out and are acked; the rest wait in the queue for the next executor', async () => {
    const first = startExecutor({ maxWorkers: 4 });
    const run = uniqueName('drain');
    const envelopes = Array.from({ length: 12 }, (_, i) => ({
      request: { uri: `${h.target.url}/slow/300?run=${run}&seq=${i}` },
      meta: { requestId: `${run}-${i}` },
    }));
    await submit(first.queue, envelopes);
    const called = () => h.target.calls.filter((c) => c.path.includes(run));
    while (called().length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    await first.stop();

    const calledBeforeDrain = called().map((c) => new URL(c.path, 'http://x').searchParams.get('seq'));
    expect(calledBeforeDrain.length).toBeGreaterThan(0);
    expect(calledBeforeDrain.length).toBeLessThan(envelopes.length);
    await Promise.all(calledBeforeDrain.map((seq) => resultOf(`${run}-${seq}`)));
    const info = await new QueueAdmin(first.queue).info();
    expect(info.totals.inFlight).toBe(0);
    expect(info.totals.pending).toBe(envelopes.length - calledBeforeDrain.length);

    // A second executor on the same queue finishes the rest: nothing lost, nothing run twice.
    const second = new Executor({
      queue: first.queue,
      fetcher: testKafka().fetcher(),
      http: createHttpClient({
        connectTimeoutMs: 2_000,
        responseTimeoutMs: 10_000,
        maxResponseBytes: 1 << 20,
        followRedirects: false,
        allowPrivateTargets: ['127.0.0.1'],
      }),
      producer: h.producer,
      topicOut: outTopic,
      maxWorkers: 4,
      leaseTtlMs: 10_000,
      produceTimeoutMs: 10_000,
      logger: silentLogger,
    });
    second.start();
    h.onClose(() => second.drain());
    await Promise.all(envelopes.map((e) => resultOf(e.meta.requestId)));
    expect(called()).toHaveLength(envelopes.length);
    for (const e of envelopes) expect(results.get(e.meta.requestId)).toHaveLength(1);
  });

  // multiplier^n was Infinity and 0 · Infinity NaN: the queue refused the reschedule, the lease lapsed
  // and the same attempt ran again (7 calls for max 4), with no result and no dead letter.
  it('retries a 500 with delay 0s and multiplier 1e308 exactly retry.max times, then dead-letters it', async () => {
    const { queue } = startExecutor({ leaseTtlMs: 2_000 });
    const requestId = uniqueName('nan');
    const retry = { max: 4, delay: '0s', multiplier: 1e308, jitter: 0 };
    await submit(queue, [
      { request: { uri: `${h.target.url}/status/500?id=${requestId}` }, meta: { requestId, retry } },
    ]);
    const result = await resultOf(requestId);
    expect(result.response.status).toBe(500);
    expect(result.meta.tryCount).toBe(4);
    await h.until(() => h.deadLetters.get(requestId));
    expect(h.deadLetters.get(requestId)?.[0]?.headers['requester-dlq-reason']).toBe('retries_exhausted');
    expect(h.callsWith(requestId)).toHaveLength(4);
  }, 20_000);

  it('confines a reschedule the queue would refuse to its own task: an internal result, the batch goes on', async () => {
    const queue = h.newQueue();
    const bad = uniqueName('bad-delay');
    const waiting = uniqueName('waits');
    // A sliding log of 1 per 5 s: its one slot stays taken for 5 s from the take, wherever the
    // take falls (a 1 s fixed window could roll over before the executor's first lease).
    const spec = {
      key: waiting,
      algorithm: 'sliding-window-log' as const,
      rates: [{ duration: '5s', value: 1 }],
    };
    await limiter.take(spec); // the slot is taken: `waiting` is rescheduled by the limiter
    await submit(queue, [
      {
        request: { uri: `${h.target.url}/status/500?id=${bad}` },
        meta: { requestId: bad, retry: { max: 3 } },
      },
      { request: { uri: `${h.target.url}/echo?id=${waiting}` }, meta: { requestId: waiting, limiter: spec } },
    ]);
    // Dice outside [0, 1) make the backoff NaN: the stand-in for any bug in the delay arithmetic.
    startExecutor({ queue, limiter, random: () => Number.NaN, leaseTtlMs: 2_000 });
    const [broken, waited] = await Promise.all([resultOf(bad), resultOf(waiting)]);
    expect(broken.meta.error).toMatchObject({
      code: 'internal',
      message: expect.stringMatching(/cannot reschedule: NaN/),
    });
    expect(waited.response.status).toBe(200);
    expect(waited.meta.waitTime).toBeGreaterThan(0);
    expect(h.callsWith(bad)).toHaveLength(1);
    expect(results.get(bad)).toHaveLength(1);
  }, 20_000);
});

/** The sizes the executor asks its leases for, in order (the queue's `lease` wrapped). */
function leasesAsked(queue: FairQueue): number[] {
  const asked: number[] = [];
  const lease = queue.lease.bind(queue);
  queue.lease = (k, leaseMs) => {
    asked.push(k);
    return lease(k, leaseMs);
  };
  return asked;
}
