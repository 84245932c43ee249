import type { ResultEnvelope, Sql } from '@requester/shared';
import { eventually, startTarget, type Target, uniqueName } from '@requester/shared/testing';
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
 * Cancel (issue 22; docs/architecture.md §14) through every role: a request taken back with
 * `DELETE /requests/{id}` gets exactly one result, `cancelled` (499, who and when), and no attempt
 * after the cancel, wherever it was — ordered behind a head, in flight, waiting for a retry in Redis
 * or in the outbox, scheduled in the outbox, or due now (racing its own lease). Another key's
 * cancel of the same id touches nothing.
 */
describe('cancel: DELETE /requests/{id}', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let sql: Sql;
  let owner: Awaited<ReturnType<typeof stackKey>>;
  let other: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    ({ stack, running, results } = await startStackUnderTest());
    target = await startTarget();
    sql = stackSql(stack);
    owner = await stackKey(stack);
    other = await stackKey(stack);
  }, 120_000);

  afterAll(async () => {
    await target?.close();
    await sql?.end({ timeout: 5 });
    await stopStackUnderTest({ stack, running, results });
  }, 60_000);

  const send = async (key: { headers: Record<string, string> }, body: unknown) => {
    const response = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...key.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(202);
  };
  const cancel = async (key: { headers: Record<string, string> }, requestId: string) => {
    const response = await fetch(`${stack.httpUrl}/requests/${encodeURIComponent(requestId)}`, {
      method: 'DELETE',
      headers: key.headers,
    });
    expect(response.status).toBe(202);
    return (await response.json()) as { requestId: string; by: string; at: string; first: boolean };
  };
  /** A DELETE that must be refused: its status and problem body. */
  const refused = async (key: { headers: Record<string, string> }, requestId: string) => {
    const response = await fetch(`${stack.httpUrl}/requests/${encodeURIComponent(requestId)}`, {
      method: 'DELETE',
      headers: key.headers,
    });
    const body = (await response.json()) as { code?: string; status?: number };
    return { status: response.status, code: body.code };
  };
  const callsTo = (path: string) => target.calls.filter((call) => call.path.startsWith(path)).length;
  const outboxRows = async (requestId: string) =>
    Number((await sql`select count(*) as n from outbox where request_id = ${requestId}`)[0]?.n);
  const cancelledBy = (result: ResultEnvelope, by: string) => {
    expect(result.response.status).toBe(499);
    expect(result.meta.error?.code).toBe('cancelled');
    expect((result.meta as { cancelled?: { by: string } }).cancelled?.by).toBe(by);
  };

  it('answers an in-flight, an ordered-behind-the-head and a retrying request once, with no attempt after the cancel', async () => {
    const partition = `!${uniqueName('order')}`;
    const hold = uniqueName('held');
    const [inFlight, behind, after, foreign] = ['a', 'b', 'c', 'd'].map((n) => uniqueName(`ord-${n}`)) as [
      string,
      string,
      string,
      string,
    ];
    const retry = { max: 5, delay: '100ms' };
    await send(owner, {
      request: { uri: `${target.url}/hold/${hold}/503` },
      meta: { requestId: inFlight, partition, retry },
    });
    await eventually(() => target.holding(hold) === 1, 30_000, 'the head is in flight');
    await send(owner, {
      request: { uri: `${target.url}/echo/${behind}` },
      meta: { requestId: behind, partition },
    });
    await send(owner, {
      request: { uri: `${target.url}/echo/${after}` },
      meta: { requestId: after, partition },
    });
    await send(owner, { request: { uri: `${target.url}/echo/${foreign}` }, meta: { requestId: foreign } });

    const first = await cancel(owner, inFlight);
    expect(first).toMatchObject({ requestId: inFlight, by: `client:${owner.name}`, first: true });
    expect(await cancel(owner, inFlight)).toMatchObject({ at: first.at, first: false });
    await cancel(owner, behind);
    // Another key's request of the same id is another request: this touches none of the owner's,
    // and is answered as an id never sent (404), so it tells nothing of the owner's.
    expect(await refused(other, foreign)).toEqual(await refused(other, uniqueName('never-sent')));
    expect(await refused(other, foreign)).toEqual({ status: 404, code: 'not_found' });
    target.release(hold);

    const headResult = await results.one(inFlight);
    cancelledBy(headResult, `client:${owner.name}`);
    // The attempt in flight stood (one call, counted); its 503 would have been retried.
    expect(headResult.meta.tryCount).toBe(1);
    expect(callsTo(`/hold/${hold}`)).toBe(1);
    cancelledBy(await results.one(behind), `client:${owner.name}`);
    expect((await results.one(behind)).meta.tryCount).toBe(0);
    expect((await results.one(after)).response.status).toBe(200);
    expect((await results.one(foreign)).response.status).toBe(200);
    expect(callsTo(`/echo/${behind}`)).toBe(0);
    expect(callsTo(`/echo/${after}`)).toBe(1);
    for (const id of [inFlight, behind, after, foreign]) expect(results.byId.get(id)).toHaveLength(1);
  }, 90_000);

  it('answers a retry waiting in Redis and one waiting in the outbox, without another attempt', async () => {
    const [nearRetry, farRetry] = [uniqueName('near'), uniqueName('far')];
    await send(owner, {
      request: { uri: `${target.url}/status/503?r=${nearRetry}` },
      meta: { requestId: nearRetry, retry: { max: 50, delay: '300ms', maxDelay: '300ms' } },
    });
    await send(owner, {
      request: { uri: `${target.url}/status/503?r=${farRetry}` },
      meta: { requestId: farRetry, retry: { max: 5, delay: '1h', maxDelay: '1h' } },
    });
    await eventually(() => callsTo(`/status/503?r=${nearRetry}`) >= 2, 30_000, 'the near retry retries');
    await eventually(
      async () => (await outboxRows(farRetry)) === 1,
      30_000,
      'the far retry waits in the outbox',
    );
    await Promise.all([cancel(owner, nearRetry), cancel(owner, farRetry)]);

    const near = await results.one(nearRetry);
    cancelledBy(near, `client:${owner.name}`);
    // Every attempt made is counted in the result, and none followed it.
    expect(near.meta.tryCount).toBe(callsTo(`/status/503?r=${nearRetry}`));
    const far = await results.one(farRetry);
    cancelledBy(far, `client:${owner.name}`);
    expect(far.meta.tryCount).toBe(1);
    expect(callsTo(`/status/503?r=${farRetry}`)).toBe(1);
    expect(await outboxRows(farRetry)).toBe(0);
  }, 90_000);

  it('answers a request scheduled far ahead now, from the outbox, and never calls its target', async () => {
    const scheduled = uniqueName('sched');
    await send(owner, {
      request: { uri: `${target.url}/echo/${scheduled}` },
      meta: {
        requestId: scheduled,
        scheduled: new Date(Date.now() + 30 * 86_400_000).toISOString(),
        proxyData: { reminder: 42 },
      },
    });
    await eventually(async () => (await outboxRows(scheduled)) === 1, 30_000, 'the request is in the outbox');
    await cancel(owner, scheduled);
    const result = await results.one(scheduled);
    cancelledBy(result, `client:${owner.name}`);
    expect(result.meta.proxyData).toEqual({ reminder: 42 });
    expect(result.meta.client).toBe(owner.name);
    expect(result.meta.tryCount).toBe(0);
    expect(callsTo(`/echo/${scheduled}`)).toBe(0);
    // The relay deletes the row once its record is in Kafka: the result may be out first.
    await eventually(async () => (await outboxRows(scheduled)) === 0, 30_000, 'the row is deleted');
  }, 60_000);

  it('races a cancel with the lease of a request due now: one result, and a cancelled one never ran', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => uniqueName(`race-${i}`));
    await Promise.all(
      ids.map(async (requestId) => {
        await send(owner, { request: { uri: `${target.url}/echo/${requestId}` }, meta: { requestId } });
        await cancel(owner, requestId);
      }),
    );
    await results.until(
      () => ids.every((id) => results.byId.has(id)),
      60_000,
      'every raced request answered',
    );
    for (const id of ids) {
      const [result] = results.byId.get(id) ?? [];
      if (result?.meta.error?.code === 'cancelled') expect(callsTo(`/echo/${id}`)).toBe(0);
      else {
        // It ran before the cancel was recorded: its own result, one call.
        expect(result?.response.status).toBe(200);
        expect(callsTo(`/echo/${id}`)).toBe(1);
      }
    }
    for (const id of ids) expect(results.byId.get(id)).toHaveLength(1);
  }, 90_000);

  it('answers 404 for an id never sent (nothing recorded: a request sent after it runs), and refuses a bad id', async () => {
    const reused = uniqueName('reused');
    expect(await refused(owner, reused)).toEqual({ status: 404, code: 'not_found' });
    await send(owner, { request: { uri: `${target.url}/echo/${reused}` }, meta: { requestId: reused } });
    expect((await results.one(reused)).response.status).toBe(200);
    const bad = await fetch(`${stack.httpUrl}/requests/${encodeURIComponent('has space')}`, {
      method: 'DELETE',
      headers: owner.headers,
    });
    expect(bad.status).toBe(400);
    const anonymous = await fetch(`${stack.httpUrl}/requests/${reused}`, { method: 'DELETE' });
    expect(anonymous.status).toBe(401);
  }, 60_000);
});
