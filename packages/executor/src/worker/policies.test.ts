import { inspect } from 'node:util';
import { CircuitBreaker, originOf, RateLimiter } from '@requester/policies';
import { type FairQueue, QueueAdmin } from '@requester/queue';
import {
  LIMITER_ALGORITHMS,
  type LimiterAlgorithm,
  parseDeadLetter,
  type RequestEnvelopeInput,
} from '@requester/shared/contract';
import type { Logger } from '@requester/shared/log';
import { Outbox } from '@requester/shared/outbox';
import {
  type RemotePacedTarget,
  startPacedTargetProcess,
  startTarget,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { durationToMs } from '@requester/shared/time';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResponseCache } from '../cache/index.ts';
import { idempotencyKey } from '../http/request.ts';
import { parseSigningKeys } from '../signing/index.ts';
import { verifyPlain, verifyStandardWebhook } from '../signing/verify.fixture.ts';
import { ExecutorHarness } from './harness.fixture.ts';
import type { CallOrRefusal } from './policies.ts';

/**
 * The delivery policies of docs/architecture.md §5 through the executor, over the real Kafka, Redis and
 * PostgreSQL and a real HTTP target (see ExecutorHarness). Timing assertions are lower bounds only.
 */
describe('executor delivery policies (end to end)', () => {
  const h = new ExecutorHarness();
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const resultsOf = (envelopes: RequestEnvelopeInput[]) =>
    Promise.all(envelopes.map((e) => h.resultOf(e.meta.requestId)));
  const limiter = () => new RateLimiter({ redis: h.redis, prefix: h.prefix('lim') });

  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  describe('rate limiter', () => {
    /**
     * The target sees a call some time after the limiter admitted it (this process's own latency:
     * the Redis reply, the batch, the HTTP hop). The checks allow each call up to SLACK_MS of it —
     * generous, so a loaded CI machine cannot fail them, yet 12 unlimited calls in ~1 s still break
     * the 1s/3 bound; the exact bounds on the Redis clock are the limiter's own tests.
     */
    const SLACK_MS = 1_000;
    const RATES = [
      { duration: '1s', value: 3 },
      { duration: '3s', value: 6 },
    ];
    let queue: FairQueue;
    // A target in a process of its own, never refusing: one in this process shares the executors'
    // event loop, and a stall of it after a call left stamps the call's arrival late (a fresh
    // clone's run, the checks compiling beside it: 7 arrivals within 1,954 ms, sent over 3 s).
    let target: RemotePacedTarget;

    beforeAll(async () => {
      ({ queue } = h.startExecutor({ maxWorkers: 32, limiter: limiter() }));
      target = await startPacedTargetProcess({
        kind: 'quota',
        perWindow: 1_000_000,
        windowMs: 1_000,
        advertise: false,
      });
    });
    afterAll(() => target.close());

    it.concurrent.for(LIMITER_ALGORITHMS)(
      '%s: under bursty load the calls at the target stay within every window; a denial is no call',
      async (algorithm, { expect }) => {
        const run = uniqueName(algorithm);
        const spec = { key: run, algorithm, rates: RATES };
        const bursts = [0, 1, 2].map((b) =>
          Array.from({ length: 4 }, (_, i) => ({
            request: { uri: `${target.url}/echo?run=${run}&n=${b}-${i}` },
            meta: { requestId: `${run}-${b}-${i}`, limiter: spec },
          })),
        );
        for (const burst of bursts) {
          await h.submit(queue, burst);
          await sleep(400);
        }
        const results = await resultsOf(bursts.flat());
        expect(results.map((r) => r.response.status)).toEqual(results.map(() => 200));
        expect(results.some((r) => r.meta.waitTime > 0)).toBe(true); // some waited for the limiter
        expect(results.every((r) => r.meta.tryCount === 1)).toBe(true); // a wait is not an attempt
        const arrivals = (await target.arrivals())
          .filter((a) => a.path.includes(`run=${run}&`))
          .map((a) => a.at);
        expect(arrivals).toHaveLength(12);
        for (const rate of RATES) {
          expect(overLimit(algorithm, arrivals, durationToMs(rate.duration), rate.value, SLACK_MS)).toEqual(
            [],
          );
        }
      },
    );
  });

  describe('rate limiter keys and clients', () => {
    const shared = uniqueName('partner-quota');
    let queue: FairQueue;

    beforeAll(() => {
      ({ queue } = h.startExecutor({
        maxWorkers: 4,
        limiter: limiter(),
        sharedLimiterKeys: new Set([shared]),
      }));
    });

    const call = (client: string, key: string, duration: string): RequestEnvelopeInput => {
      const requestId = uniqueName(client);
      return {
        request: { uri: `${h.target.url}/echo?id=${requestId}` },
        meta: {
          requestId,
          client,
          limiter: { key, algorithm: 'sliding-window-log', rates: [{ duration, value: 1 }] },
        },
      };
    };

    it("a client's limiter key is its own: another client's calls under the same key neither spend nor wait on it", async () => {
      const key = uniqueName('own');
      const calls = [call('probe-a', key, '1h'), call('probe-b', key, '1h')];
      await h.submit(queue, calls);
      const results = await resultsOf(calls);
      expect(results.map((r) => [r.response.status, r.meta.waitTime])).toEqual([
        [200, 0],
        [200, 0],
      ]);
    });

    it('meta.limiter.cost counts against the window: two calls of cost 3 do not fit a window of 5', async () => {
      const key = uniqueName('cost');
      const calls = [call('probe-a', key, '2s'), call('probe-a', key, '2s')].map((c) => ({
        ...c,
        meta: { ...c.meta, limiter: { ...c.meta.limiter!, rates: [{ duration: '2s', value: 5 }], cost: 3 } },
      }));
      await h.submit(queue, calls);
      const results = await resultsOf(calls);
      expect(results.map((r) => r.response.status)).toEqual([200, 200]);
      const waits = results.map((r) => r.meta.waitTime).sort((a, b) => a - b);
      expect(waits[0]).toBe(0);
      expect(waits[1]).toBeGreaterThan(0); // waited for the first one's 3 units to leave the window
    });

    it('a key the operator declared shared (SHARED_LIMITER_KEYS) is one limiter for every client', async () => {
      const first = call('probe-a', shared, '2s');
      await h.submit(queue, [first]);
      expect((await h.resultOf(first.meta.requestId)).meta.waitTime).toBe(0);
      const second = call('probe-b', shared, '2s');
      await h.submit(queue, [second]);
      const held = await h.resultOf(second.meta.requestId);
      expect(held.response.status).toBe(200);
      expect(held.meta.waitTime).toBeGreaterThan(0); // waited for probe-a's call to leave the window
    });
  });

  describe('retries', () => {
    const RETRY = { max: 5, delay: '200ms', maxDelay: '300ms', multiplier: 2, jitter: 0 };
    let queue: FairQueue;

    beforeAll(() => {
      ({ queue } = h.startExecutor({ maxWorkers: 16 }));
    });

    it('503 twice then 200: one result with tryCount 3; pauses grow; the same Idempotency-Key and traceparent each time', async () => {
      const requestId = uniqueName('flaky');
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      await h.submit(queue, [
        {
          request: { uri: `${h.target.url}/flaky/${requestId}/2` },
          meta: { requestId, retry: RETRY, traceparent },
        },
      ]);
      const result = await h.resultOf(requestId);
      expect(result.response.status).toBe(200);
      expect(result.meta).toMatchObject({ tryCount: 3, waitTime: 0 });
      const calls = h.callsWith(requestId);
      expect(calls).toHaveLength(3);
      // delay · multiplier^(n−1) capped at maxDelay: 200 ms, then 300 ms (not 400: decide.unit.test.ts)
      expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(200);
      expect(calls[2]!.at - calls[1]!.at).toBeGreaterThanOrEqual(300);
      expect(new Set(calls.map((c) => c.headers['idempotency-key']))).toEqual(
        new Set([idempotencyKey(requestId)]),
      );
      expect(new Set(calls.map((c) => c.headers.traceparent))).toEqual(new Set([traceparent]));
      expect(h.results.get(requestId)).toHaveLength(1);
      expect(h.deadLetters.has(requestId)).toBe(false);
    });

    it('honours Retry-After: 2 (waits at least 2 s, beyond the backoff)', async () => {
      const requestId = uniqueName('after');
      await h.submit(queue, [
        {
          request: { uri: `${h.target.url}/flaky/${requestId}/1?status=429&retry-after=2` },
          meta: { requestId, retry: RETRY },
        },
      ]);
      const result = await h.resultOf(requestId);
      expect(result.meta.tryCount).toBe(2);
      const [first, second] = h.callsWith(requestId);
      expect(second!.at - first!.at).toBeGreaterThanOrEqual(2_000);
    });

    it('does not retry a 400: delivered at once and dead-lettered as permanent', async () => {
      const requestId = uniqueName('bad');
      await h.submit(queue, [
        { request: { uri: `${h.target.url}/status/400?id=${requestId}` }, meta: { requestId, retry: RETRY } },
      ]);
      const result = await h.resultOf(requestId);
      expect(result.response.status).toBe(400);
      expect(result.meta.tryCount).toBe(1);
      expect(h.callsWith(requestId)).toHaveLength(1);
      const [letter] = await h.until(() => h.deadLetters.get(requestId));
      const record = parseDeadLetter(letter!.value);
      expect(record).toMatchObject({ reason: 'permanent', result: { response: { status: 400 } } });
      expect(record.envelope.meta.requestId).toBe(requestId);
      expect(letter!.headers['requester-dlq-source']).toBe(
        `${record.source?.topic}/${record.source?.partition}/${record.source?.offset}`,
      );
    });

    it('stops at retry.max: the last failure is the result (tryCount = max) and a retries_exhausted dead letter', async () => {
      const requestId = uniqueName('exhausted');
      await h.submit(queue, [
        {
          request: { uri: `${h.target.url}/status/503?id=${requestId}` },
          meta: { requestId, retry: { ...RETRY, max: 3, delay: '50ms' } },
        },
      ]);
      const result = await h.resultOf(requestId);
      expect(result).toMatchObject({ response: { status: 503 }, meta: { tryCount: 3 } });
      expect(h.callsWith(requestId)).toHaveLength(3);
      const [letter] = await h.until(() => h.deadLetters.get(requestId));
      expect(parseDeadLetter(letter!.value)).toMatchObject({ reason: 'retries_exhausted', result });
    });

    it('an ordered partition under retry keeps its order and blocks only itself', async () => {
      const run = uniqueName('ord-retry');
      h.target.switches.set(run, 503); // the head fails until the test brings its target back
      const ordered = Array.from({ length: 5 }, (_, i) => ({
        request: {
          uri: i === 0 ? `${h.target.url}/switch/${run}?seq=0` : `${h.target.url}/echo?run=${run}&seq=${i}`,
        },
        meta: { requestId: `${run}-${i}`, partition: `!${run}`, retry: { ...RETRY, max: 100 } },
      }));
      const others = Array.from({ length: 10 }, (_, i) => ({
        request: { uri: `${h.target.url}/echo?run=${run}-other&i=${i}` },
        meta: { requestId: `${run}-other-${i}` },
      }));
      await h.submit(queue, ordered);
      await h.until(() => (h.callsWith(`/switch/${run}`).length >= 2 ? true : undefined)); // retried once
      await h.submit(queue, others);
      await resultsOf(others); // other partitions flow while this one waits on its head
      expect(h.callsWith(`run=${run}&`)).toHaveLength(0); // nothing overtook the head
      h.target.switches.delete(run);
      await resultsOf(ordered);

      const sequence = h.callsWith(run).filter((c) => !c.path.includes('-other'));
      const seqs = sequence.map((c) => Number(new URL(c.path, 'http://x').searchParams.get('seq')));
      const headAttempts = seqs.filter((seq) => seq === 0).length;
      expect(headAttempts).toBeGreaterThanOrEqual(3);
      expect(seqs).toEqual([...Array.from({ length: headAttempts }, () => 0), 1, 2, 3, 4]);
      expect((await h.resultOf(`${run}-0`)).meta.tryCount).toBe(headAttempts);
      for (const e of ordered) expect(h.results.get(e.meta.requestId)).toHaveLength(1);
    });
  });

  describe('response cache', () => {
    let queue: FairQueue;

    beforeAll(() => {
      const cache = new ResponseCache<CallOrRefusal>({ redis: h.redis, prefix: h.prefix('cache') });
      h.onClose(() => cache.close());
      ({ queue } = h.startExecutor({ maxWorkers: 64, cache, limiter: limiter() }));
    });

    it('50 concurrent identical requests make 1 call; later ones are hits until the TTL, and hits spend no limiter token', async () => {
      const run = uniqueName('cache');
      // Two tokens an hour: one per fill. A hit that spent a token would leave the second fill
      // (after the TTL) waiting an hour, and a denied request would show a waitTime.
      const spec = { key: run, algorithm: 'token-bucket' as const, rates: [{ duration: '1h', value: 2 }] };
      const request = (id: string) => ({
        request: { uri: `${h.target.url}/slow/300?run=${run}` },
        meta: { requestId: `${run}-${id}`, cache: { key: run, ttl: '5s' }, limiter: spec },
      });
      const burst = Array.from({ length: 50 }, (_, i) => request(`a${i}`));
      await h.submit(queue, burst);
      const first = await resultsOf(burst);
      const storedBy = Date.now(); // results are written after the fill stored the answer
      expect(h.callsWith(run)).toHaveLength(1);
      // Each result says how it was answered: one made the call, the others joined it or hit.
      expect(first.filter((r) => !r.meta.cached && !r.meta.coalesced)).toHaveLength(1);
      expect(first.filter((r) => r.meta.cached && r.meta.coalesced)).toHaveLength(0);
      expect(new Set(first.map((r) => r.response.status))).toEqual(new Set([200]));
      expect(first.every((r) => r.meta.waitTime === 0)).toBe(true);

      const later = Array.from({ length: 5 }, (_, i) => request(`b${i}`));
      await h.submit(queue, later);
      expect((await resultsOf(later)).map((r) => r.meta.cached)).toEqual(later.map(() => true));
      expect(h.callsWith(run)).toHaveLength(1);

      await sleep(Math.max(0, storedBy + 5_100 - Date.now())); // the entry has expired
      const expired = request('c');
      await h.submit(queue, [expired]);
      expect((await h.resultOf(expired.meta.requestId)).meta.cached).toBe(false);
      expect(h.callsWith(run)).toHaveLength(2);
    });

    it('does not store non-2xx answers', async () => {
      const run = uniqueName('nocache');
      for (let i = 0; i < 3; i++) {
        const requestId = `${run}-${i}`;
        await h.submit(queue, [
          {
            request: { uri: `${h.target.url}/status/503?run=${run}` },
            meta: { requestId, cache: { key: run, ttl: '1m' } },
          },
        ]);
        expect((await h.resultOf(requestId)).meta).toMatchObject({ cached: false });
      }
      expect(h.callsWith(run)).toHaveLength(3);
    });
  });

  describe('circuit breaker', () => {
    it('a dead origin gets at most threshold + probes calls from 1,000 tasks; another origin flows; recovery closes it', async () => {
      const THRESHOLD = 3;
      const OPEN_MS = 300;
      const dead = await startTarget();
      h.onClose(() => dead.close());
      const breaker = new CircuitBreaker({
        redis: h.redis,
        prefix: h.prefix('brk'),
        failureThreshold: THRESHOLD,
        openMs: OPEN_MS,
        maxOpenMs: 600,
        stateCacheMs: 100,
        busyRetryMs: 200,
      });
      const { queue } = h.startExecutor({ maxWorkers: 32, breaker });
      const run = uniqueName('brk');
      dead.switches.set(run, 503);
      const doomed = Array.from({ length: 1_000 }, (_, i) => ({
        request: { uri: `${dead.url}/switch/${run}?i=${i}` },
        meta: { requestId: `${run}-${i}` },
      }));
      const healthy = Array.from({ length: 50 }, (_, i) => ({
        request: { uri: `${h.target.url}/echo?run=${run}&i=${i}` },
        meta: { requestId: `${run}-ok-${i}` },
      }));
      const downSince = Date.now();
      await h.submit(queue, doomed);
      await h.submit(queue, healthy);

      // A new origin is unproven: only `threshold` calls at once until one succeeds, so some of
      // these may wait a moment; all are answered while the dead origin is still down.
      const fine = await resultsOf(healthy);
      expect(fine.map((r) => [r.response.status, r.meta.tryCount])).toEqual(fine.map(() => [200, 1]));
      await sleep(2_000); // the dead origin stays down a while: a few open periods, a probe each
      dead.switches.delete(run); // and recovers
      const downMs = Date.now() - downSince;
      const calledWhileDown = dead.calls.length;
      expect(calledWhileDown).toBeGreaterThanOrEqual(THRESHOLD);
      // one probe per open period at most, and every open period lasts at least OPEN_MS
      expect(calledWhileDown).toBeLessThanOrEqual(THRESHOLD + Math.ceil(downMs / OPEN_MS));

      // Without a retry policy, each call answered 503 is final (and dead-lettered); every other
      // task waited for the breaker (not an attempt) and is delivered once the origin is back.
      const results = await resultsOf(doomed);
      const failed = results.filter((r) => r.response.status === 503);
      expect(failed.length).toBeLessThanOrEqual(calledWhileDown);
      expect(results.filter((r) => r.response.status === 200)).toHaveLength(1_000 - failed.length);
      expect(results.every((r) => r.meta.tryCount === 1)).toBe(true);
      expect(results.filter((r) => r.meta.waitTime > 0).length).toBeGreaterThan(900);
      for (const r of failed) expect(h.deadLetters.has(r.meta.requestId ?? '')).toBe(true);
      for (const e of doomed) expect(h.results.get(e.meta.requestId)).toHaveLength(1);
      expect((await breaker.snapshot(originOf(dead.url))).state).toBe('closed');
    }, 120_000);
  });

  describe('signing', () => {
    const whsec = `whsec_${Buffer.from('a-standard-webhooks-secret-0123').toString('base64')}`;
    const plain = 'text:a-plain-hmac-secret-456789';
    const secretTexts = [
      whsec,
      whsec.slice(6),
      'a-standard-webhooks-secret-0123',
      'a-plain-hmac-secret-456789',
    ];

    it('signs each attempt (verified independently); secrets never reach out, the DLQ, in or the logs', async () => {
      const log = recordingLogger();
      const { queue } = h.startExecutor({
        signingKeys: parseSigningKeys(`hooks=${whsec};plain=${plain}`),
        logger: log.logger,
      });
      const run = uniqueName('sign');
      const body = '{"order":42}';
      const envelopes = [
        {
          request: { uri: `${h.target.url}/flaky/${run}-sw/1?run=${run}`, method: 'POST', body },
          meta: { requestId: `${run}-sw`, signing: { keyId: 'hooks' }, retry: { max: 2, delay: '10ms' } },
        },
        {
          request: { uri: `${h.target.url}/echo?run=${run}-plain`, method: 'POST', body },
          meta: { requestId: `${run}-plain`, signing: { keyId: 'plain' } },
        },
        {
          request: { uri: `${h.target.url}/echo?run=${run}-unknown`, method: 'POST', body },
          meta: { requestId: `${run}-unknown`, signing: { keyId: 'nobody' } },
        },
      ];
      await h.submit(queue, envelopes);
      const [webhook, hmac, unknown] = await resultsOf(envelopes);

      expect(webhook).toMatchObject({ response: { status: 200 }, meta: { tryCount: 2 } });
      const attempts = h.callsWith(`${run}-sw`);
      expect(attempts).toHaveLength(2);
      for (const call of attempts) {
        const headers = call.headers as Record<string, string>;
        expect(verifyStandardWebhook(whsec, headers, call.body, Date.now() / 1000)).toBe(true);
      }
      expect(hmac!.response.status).toBe(200);
      const [plainCall] = h.callsWith(`${run}-plain`);
      const key = Buffer.from('a-plain-hmac-secret-456789');
      expect(verifyPlain(key, plainCall!.headers as Record<string, string>, plainCall!.body)).toBe(true);

      expect(unknown).toMatchObject({
        response: { status: 400 },
        meta: { tryCount: 0, error: { code: 'invalid_request' } },
      });
      expect(h.callsWith(`${run}-unknown`)).toHaveLength(0);
      const [letter] = await h.until(() => h.deadLetters.get(`${run}-unknown`));

      const written = [
        ...[webhook, hmac, unknown].map((r) => JSON.stringify(r)),
        letter!.value,
        ...envelopes.map((e) => JSON.stringify(e)), // what `in` holds
        log.text(),
      ].join('\n');
      expect(log.text()).toContain(`${run}-unknown`); // the log did record this work
      for (const secret of secretTexts) expect(written).not.toContain(secret);
    });
  });

  describe('signing of wake-ups', () => {
    it('answers a wake-up naming an unknown key id with a 400 result, as a call; a known one wakes up', async () => {
      const { queue } = h.startExecutor({
        signingKeys: parseSigningKeys('hooks=text:a-plain-hmac-secret-456789'),
      });
      const run = uniqueName('wake-sign');
      const wakeUp = (id: string, keyId: string) => ({
        request: { uri: '', body: 'ring' },
        meta: { requestId: `${run}-${id}`, signing: { keyId } },
      });
      const envelopes = [wakeUp('unknown', 'nobody'), wakeUp('known', 'hooks')];
      await h.submit(queue, envelopes);
      const [unknown, known] = await resultsOf(envelopes);
      expect(unknown).toMatchObject({
        response: { status: 400 },
        meta: { tryCount: 0, error: { code: 'invalid_request', message: /unknown signing key id "nobody"/ } },
      });
      await h.until(() => h.deadLetters.get(`${run}-unknown`));
      expect(known).toMatchObject({ response: { status: 200, body: 'ring' }, meta: { tryCount: 1 } });
    });
  });

  describe('waits beyond the horizon', () => {
    let pg: Awaited<ReturnType<typeof testPg>>;
    let outbox: Outbox;

    beforeAll(async () => {
      pg = await testPg();
      outbox = new Outbox(pg.sql);
    });
    afterAll(() => pg.drop());

    const onePerHour = (key: string, algorithm: LimiterAlgorithm) => ({
      key,
      algorithm,
      rates: [{ duration: '1h', value: 1 }],
    });
    const rowsOf = async (requestIds: string[]) =>
      pg.sql<Array<{ task_id: string; payload: Buffer; due_at: Date }>>`
        select task_id, payload, due_at from outbox where request_id = any(${requestIds}) order by task_id`;

    it('unordered: a long limiter wait and a long Retry-After go to the outbox with their progress; the lease is acked', async () => {
      const { queue } = h.startExecutor({ limiter: limiter(), outbox, horizonMs: 500 });
      const run = uniqueName('park');
      const spec = onePerHour(run, 'sliding-window-log');
      const startedAt = Date.now();
      const first = {
        request: { uri: `${h.target.url}/echo?run=${run}` },
        meta: { requestId: `${run}-a`, limiter: spec },
      };
      await h.submit(queue, [first]);
      await h.resultOf(first.meta.requestId);
      const denied = {
        request: { uri: `${h.target.url}/echo?run=${run}` },
        meta: { requestId: `${run}-b`, limiter: spec },
      };
      const busy = {
        request: { uri: `${h.target.url}/flaky/${run}/1?status=503&retry-after=30` },
        meta: { requestId: `${run}-c`, retry: { max: 3, delay: '10ms' } },
      };
      await h.submit(queue, [denied, busy]);
      let rows = await rowsOf([denied.meta.requestId, busy.meta.requestId]);
      while (rows.length < 2) {
        await sleep(50);
        rows = await rowsOf([denied.meta.requestId, busy.meta.requestId]);
      }

      const [waited, retried] = rows.map((row) => ({ ...row, envelope: JSON.parse(row.payload.toString()) }));
      expect(waited!.task_id).toMatch(new RegExp(`^${run}-b:0:w\\d+$`)); // a new id: the dedup window would refuse the old one
      expect(waited!.envelope).toMatchObject({ meta: { requestId: `${run}-b`, limiter: spec }, tryCount: 0 });
      expect(waited!.envelope.waitTime).toBeGreaterThan(59 * 60 * 1e9); // about an hour, in ns
      expect(waited!.due_at.getTime()).toBeGreaterThanOrEqual(startedAt + 59 * 60_000);
      expect(retried!.task_id).toBe(`${run}-c:1`);
      expect(retried!.envelope).toMatchObject({ meta: { requestId: `${run}-c` }, tryCount: 1 });
      expect(retried!.due_at.getTime()).toBeGreaterThanOrEqual(startedAt + 30_000);
      expect(h.callsWith(`/echo?run=${run}`)).toHaveLength(1);
      expect(await settledTotals(queue)).toMatchObject({ pending: 0 });
    });

    it('ordered: a long wait stays in Redis at the head of its partition, which it blocks alone', async () => {
      const { queue } = h.startExecutor({ limiter: limiter(), outbox, horizonMs: 500 });
      const run = uniqueName('hold');
      const spec = onePerHour(run, 'fixed-window-counter');
      const ordered = Array.from({ length: 3 }, (_, i) => ({
        request: { uri: `${h.target.url}/echo?run=${run}&seq=${i}` },
        meta: { requestId: `${run}-${i}`, partition: `!${run}`, ...(i < 2 ? { limiter: spec } : {}) },
      }));
      await h.submit(queue, ordered);
      await h.resultOf(`${run}-0`);
      const neighbour = {
        request: { uri: `${h.target.url}/echo?run=${run}-n` },
        meta: { requestId: `${run}-n` },
      };
      await h.submit(queue, [neighbour]);
      await h.resultOf(neighbour.meta.requestId);
      // seq 1 waits at the head (about an hour), seq 2 behind it
      expect(await settledTotals(queue)).toMatchObject({ pending: 2, waitingPartitions: 1 });
      expect(h.results.has(`${run}-1`) || h.results.has(`${run}-2`)).toBe(false);
      expect(await rowsOf([`${run}-1`, `${run}-2`])).toEqual([]);
    });
  });
});

/**
 * Windows in which the target saw more calls than `algorithm` admits for one rate, allowing each
 * call up to `slackMs` between the limiter's decision and its arrival. Buckets admit at most
 * value + value·L/d in any span L; the sliding log at most value per window length; the fixed and
 * sliding counters at most value per epoch-aligned window.
 */
function overLimit(
  algorithm: LimiterAlgorithm,
  arrivals: number[],
  durationMs: number,
  value: number,
  slackMs: number,
): string[] {
  const at = [...arrivals].sort((a, b) => a - b);
  const problems: string[] = [];
  at.forEach((start, i) => {
    at.slice(i).forEach((end, k) => {
      const calls = k + 1;
      const span = end - start;
      let bound: number;
      if (algorithm === 'token-bucket' || algorithm === 'leaky-bucket') {
        bound = value + (value * (span + slackMs)) / durationMs;
      } else if (algorithm === 'sliding-window-log') {
        bound = value * (Math.floor((span + slackMs) / durationMs) + 1);
      } else {
        // epoch-aligned windows the decisions of these calls can fall in
        bound = value * (Math.floor(end / durationMs) - Math.floor((start - slackMs) / durationMs) + 1);
      }
      if (calls > bound) problems.push(`${calls} calls in ${span} ms (at most ${Math.floor(bound)})`);
    });
  });
  return problems;
}

/** A logger that keeps everything it is given, at every level, as printed text (util.inspect). */
function recordingLogger(): { logger: Logger; text(): string } {
  const lines: string[] = [];
  const make = (bindings: unknown[]): Logger => {
    const write = (...args: unknown[]) => {
      lines.push(inspect([...bindings, ...args], { depth: 20, showHidden: true }));
    };
    const methods = { trace: write, debug: write, info: write, warn: write, error: write, fatal: write };
    const child = (extra: unknown) => make([...bindings, extra]);
    return { level: 'trace', ...methods, child, isLevelEnabled: () => true } as unknown as Logger;
  };
  return { logger: make([]), text: () => lines.join('\n') };
}

/** The queue's totals once no lease is held (settlements land just after their writes). */
async function settledTotals(queue: FairQueue) {
  for (;;) {
    const { totals } = await new QueueAdmin(queue).info();
    if (totals.inFlight === 0) return totals;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
