import { type Fetcher, type ResultEnvelope, readJournal, type Sql } from '@requester/shared';
import { eventually, startTarget, type Target, testKafka, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  type ResultCollector,
  type StackEnv,
  stackKey,
  stackSql,
  startStackUnderTest,
  stopStackUnderTest,
} from './stack.fixture.ts';

/**
 * Scopes mean what they say (issue 19, finding 5; README "Access control"): a key without the
 * `schedule` scope parks no task beyond REDIS_HORIZON (1 s here) by any path — refused at the door
 * where the envelope shows it, capped by the executor where only the run does — and a key without
 * the `sync` scope cannot wait for results by long-polling either.
 */
describe('scopes: schedule and sync', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let sql: Sql;
  let noSchedule: Awaited<ReturnType<typeof stackKey>>;
  let noSync: Awaited<ReturnType<typeof stackKey>>;
  let fetcher: Fetcher;

  beforeAll(async () => {
    ({ stack, running, results } = await startStackUnderTest());
    target = await startTarget();
    sql = stackSql(stack);
    noSchedule = await stackKey(stack, { schedule: false });
    noSync = await stackKey(stack, { sync: false });
    fetcher = testKafka(stack.name).fetcher();
  }, 120_000);

  afterAll(async () => {
    await fetcher?.close();
    await target?.close();
    await sql?.end({ timeout: 5 });
    await stopStackUnderTest({ stack, running, results });
  }, 60_000);

  const post = (key: { headers: Record<string, string> }, body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...key.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const outboxRows = async (requestId: string) =>
    Number((await sql`select count(*) as n from outbox where request_id = ${requestId}`)[0]?.n);

  it('without schedule, a retry pause or a limiter window beyond REDIS_HORIZON is refused at the door, naming each field', async () => {
    const retried = uniqueName('far-retry');
    const retry = { max: 2, delay: '87600h', maxDelay: '87600h' };
    const refusedRetry = await post(noSchedule, {
      request: { uri: `${target.url}/status/500` },
      meta: { requestId: retried, retry },
    });
    expect(refusedRetry.status).toBe(403);
    expect(refusedRetry.headers.get('content-type')).toBe('application/problem+json');
    expect(await refusedRetry.json()).toMatchObject({
      code: 'forbidden',
      issues: [
        { path: 'meta.retry.delay', message: expect.stringContaining('REDIS_HORIZON') },
        { path: 'meta.retry.maxDelay', message: expect.stringContaining('schedule scope') },
      ],
    });

    const limited = uniqueName('far-limiter');
    const limiter = {
      key: uniqueName('quota'),
      algorithm: 'fixed-window-counter',
      rates: [{ duration: '87600h', value: 1 }],
    };
    const refusedLimiter = await post(noSchedule, {
      request: { uri: `${target.url}/echo` },
      meta: { requestId: limited, limiter },
    });
    expect(refusedLimiter.status).toBe(403);
    expect(await refusedLimiter.json()).toMatchObject({
      code: 'forbidden',
      issues: [{ path: 'meta.limiter.rates.0.duration', message: expect.stringContaining('REDIS_HORIZON') }],
    });

    // What stays within the horizon passes: the default pauses, a limiter of 10 per second.
    const near = uniqueName('near');
    const nearLimiter = { ...limiter, rates: [{ duration: '1s', value: 10 }] };
    const accepted = await post(noSchedule, {
      request: { uri: '' },
      meta: { requestId: near, retry: { max: 2 }, limiter: nearLimiter },
    });
    expect(accepted.status).toBe(202);
    expect((await results.one(near)).response.status).toBe(200);
    expect(await outboxRows(retried)).toBe(0);
    expect(await outboxRows(limited)).toBe(0);
  });

  it("without schedule, a target's Retry-After (up to RETRY_AFTER_MAX, 1 h) holds its origin, and the task waits in Redis a horizon at a time: nothing in the outbox", async () => {
    // A target of its own: the hold is its origin's (origin pacing), for every request to it.
    const held = await startTarget();
    try {
      const requestId = uniqueName('retry-after');
      const uri = `${held.url}/status/503?retry-after=3600&id=${requestId}`;
      const accepted = await post(noSchedule, {
        request: { uri },
        meta: { requestId, retry: { max: 2, delay: '10ms' } },
      });
      expect(accepted.status).toBe(202);
      // Held by the pace the target asked for, and back each REDIS_HORIZON (1 s) to ask again:
      // never an attempt while held, never a wait parked beyond the horizon.
      let holds: Array<{ at: number; until: number }> = [];
      await eventually(
        async () => {
          const events = await readJournal(fetcher, stack.config.topicEvents, { requestId });
          holds = events.flatMap((e) => (e.type === 'held' && e.by === 'pacing' ? [e] : []));
          return holds.length >= 2;
        },
        30_000,
        `two pacing holds of ${requestId}`,
      );
      for (const hold of holds) expect(hold.until - hold.at).toBeLessThanOrEqual(1_000);
      expect(held.calls.filter((call) => call.path.includes(requestId))).toHaveLength(1);
      expect(await outboxRows(requestId)).toBe(0);
    } finally {
      await held.close();
    }
  });

  it('without sync, a long-poll is refused like a sync call; asking without wait stays open', async () => {
    const requestId = uniqueName('no-sync');
    expect((await post(noSync, { request: { uri: '' }, meta: { requestId } })).status).toBe(202);
    const waited = await fetch(`${stack.httpUrl}/requests/${requestId}?wait=5s`, { headers: noSync.headers });
    expect(waited.status).toBe(403);
    expect(await waited.json()).toMatchObject({ code: 'forbidden', issues: [{ path: 'wait' }] });
    await results.one(requestId);
    await expect
      .poll(
        async () =>
          (await fetch(`${stack.httpUrl}/requests/${requestId}`, { headers: noSync.headers })).status,
        {
          timeout: 10_000,
        },
      )
      .toBe(200);
    const answer = (await (
      await fetch(`${stack.httpUrl}/requests/${requestId}`, { headers: noSync.headers })
    ).json()) as ResultEnvelope;
    expect(answer.meta.client).toBe(noSync.name);
  });
});
