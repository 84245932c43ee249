import type { KafkaProducer, ResultEnvelope } from '@requester/shared';
import { eventually, startTarget, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  stackSql,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/** The whole path of docs/architecture.md §3–§5 in one process: every role, real Kafka, Redis, PostgreSQL. */
describe('end to end: ingress → in → router → queue/outbox → executor → out', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let key: Awaited<ReturnType<typeof stackKey>>;
  let producer: KafkaProducer;

  beforeAll(async () => {
    target = await startTarget();
    // RELAY_STAGE_AHEAD 2 s: a task 10 s ahead waits in the outbox until 2 s before it is due (the
    // default, 60 s, would stage it into Redis at once, and its row would be gone before it is seen).
    stack = await stackEnv({ MAX_WORKERS: '32', SYNC_TIMEOUT: '2s', RELAY_STAGE_AHEAD: '2s' });
    running = await startStack(stack);
    await waitReady(stack);
    key = await stackKey(stack);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    producer = await kafkaProducer();
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    await results?.stop();
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const post = (body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...key.headers },
      body: JSON.stringify(body),
    });

  it('HTTP async: 202, then the target’s status, body and headers on out with proxyData echoed', async () => {
    const reply = await post({
      request: { uri: `${target.url}/status/201`, method: 'POST', body: 'hello', headers: { 'x-a': '1' } },
      meta: { requestId: 'async-1', proxyData: { service: 'billing', n: [1, 2] } },
    });
    expect(reply.status).toBe(202);
    expect(await reply.json()).toMatchObject({ requestId: 'async-1' });
    const result = await results.one('async-1');
    expect(result.response).toMatchObject({ status: 201, body: 'hello', headers: { 'x-target': 'test' } });
    expect(result.meta).toMatchObject({
      requestId: 'async-1',
      client: key.name, // the API key's name, stamped by the ingress, echoed by the executor
      tryCount: 1,
      cached: false,
      proxyData: { service: 'billing', n: [1, 2] },
    });
    expect(Number.isInteger(result.meta.time) && result.meta.time > 0).toBe(true);
    const call = target.calls.find((c) => c.path === '/status/201');
    expect(call?.headers['x-a']).toBe('1');
    expect(call?.headers['idempotency-key']).toBeTruthy();
  });

  it('direct Kafka producer → result on out, no HTTP involved', async () => {
    await producer.send(stack.config.topicIn, [
      {
        key: 'kafka-1',
        value: JSON.stringify({
          request: { uri: `${target.url}/echo`, body: 'via kafka', method: 'POST' },
          meta: { requestId: 'kafka-1' },
        }),
      },
    ]);
    const result = await results.one('kafka-1');
    expect(result.response).toMatchObject({ status: 200, body: 'via kafka' });
  });

  it('sync: the reply is the envelope; beyond the budget 202 + Location, and the long-poll returns it', async () => {
    const fast = await post({
      request: { uri: `${target.url}/echo`, method: 'POST', body: 'now' },
      meta: { requestId: 'sync-1', sync: true },
    });
    expect(fast.status).toBe(200);
    const envelope = (await fast.json()) as ResultEnvelope;
    expect(envelope).toMatchObject({ response: { status: 200, body: 'now' }, meta: { requestId: 'sync-1' } });

    const slow = await post({
      request: { uri: `${target.url}/slow/3500` },
      meta: { requestId: 'sync-2', sync: true },
    });
    expect(slow.status).toBe(202);
    const location = slow.headers.get('location');
    expect(location).toBe('/requests/sync-2');
    const polled = await fetch(`${stack.httpUrl}${location}?wait=20s`, { headers: key.headers });
    expect(polled.status).toBe(200);
    expect(await polled.json()).toMatchObject({ response: { status: 200 }, meta: { requestId: 'sync-2' } });
  });

  it('wake-up scheduled 3 s ahead answers after ≥ 3 s with its own body, not before', async () => {
    const sentAt = Date.now();
    const scheduled = new Date(sentAt + 3_000).toISOString();
    const reply = await post({
      request: { uri: '', body: 'ring', headers: { 'x-alarm': 'yes' } },
      meta: { requestId: 'wake-1', scheduled, proxyData: { alarm: true } },
    });
    expect(reply.status).toBe(202);
    const result = await results.one('wake-1', 20_000);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(scheduled));
    expect(result).toMatchObject({
      response: { status: 200, body: 'ring', headers: { 'x-alarm': 'yes' } },
      meta: { proxyData: { alarm: true } },
    });
  });

  it('a task 10 s ahead waits in the PostgreSQL outbox and comes back through in to the executor', async () => {
    const scheduled = new Date(Date.now() + 10_000).toISOString();
    expect(
      (
        await post({
          request: { uri: `${target.url}/echo`, body: 'later' },
          meta: { requestId: 'far-1', scheduled },
        })
      ).status,
    ).toBe(202);
    const sql = stackSql(stack);
    try {
      let rows = 0;
      for (let i = 0; i < 100 && rows === 0; i++) {
        rows = (await sql`select count(*)::int as n from outbox where request_id = 'far-1'`)[0]?.n as number;
        if (rows === 0) await new Promise((r) => setTimeout(r, 100));
      }
      expect(rows).toBe(1);
      const result = await results.one('far-1', 30_000);
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(scheduled));
      expect(result.response.status).toBe(200);
      // The relay deletes the row once Kafka acknowledged it; in another process (E2E_TOPOLOGY=cluster)
      // that delete may land after the result did.
      await eventually(
        async () => (await sql`select count(*)::int as n from outbox where request_id = 'far-1'`)[0]?.n === 0,
        10_000,
        'the outbox row of far-1 deleted',
      );
    } finally {
      await sql.end({ timeout: 5 });
    }
  }, 60_000);

  it('ordered partition: 200 tasks on !k reach a randomly slow target in publish order (32 workers)', async () => {
    const partition = `!k-${stack.name}`;
    await producer.send(
      stack.config.topicIn,
      Array.from({ length: 200 }, (_, i) => ({
        key: partition,
        value: JSON.stringify({
          request: { uri: `${target.url}/random-delay/20?seq=${i}` },
          meta: { requestId: `ord-${i}`, partition },
        }),
      })),
    );
    await results.until(
      () => Array.from({ length: 200 }, (_, i) => `ord-${i}`).every((id) => results.byId.has(id)),
      90_000,
      '200 ordered results',
    );
    const seen = target.calls
      .filter((c) => c.path.startsWith('/random-delay/20?seq='))
      .map((c) => Number(c.path.split('seq=')[1]));
    expect(seen).toEqual(Array.from({ length: 200 }, (_, i) => i));
  }, 120_000);

  it('invalid JSON and invalid schema on in → error results on out; the router keeps running', async () => {
    await producer.send(stack.config.topicIn, [
      { key: 'x', value: '{"request":' },
      {
        key: 'bad-1',
        value: JSON.stringify({ request: { uri: 'ftp://nope' }, meta: { requestId: 'bad-1' } }),
      },
      {
        key: 'after-bad',
        value: JSON.stringify({ request: { uri: '' }, meta: { requestId: 'after-bad' } }),
      },
    ]);
    const bad = await results.one('bad-1');
    expect(bad.response.status).toBe(400);
    expect(bad.meta.error).toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/request\.uri/),
    });
    await results.until(
      () =>
        [...results.byId.values()]
          .flat()
          .some((r) => r.meta.requestId === undefined && /invalid JSON/.test(r.meta.error?.message ?? '')),
      30_000,
      'the invalid-JSON result',
    );
    expect((await results.one('after-bad')).response.status).toBe(200);
  });
});
