import type { JournalEvent, ResultEnvelope } from '@requester/shared';
import { startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * The client namespace (docs/architecture.md §10): what a caller names — a cache key, an ordered
 * partition, a limiter key, a requestId — is its own. Two API keys, A and B, replay the probe of
 * issue 19 (findings 1–4) through the HTTP API of a whole stack; each case failed before the
 * namespace. A limiter key the operator declares shared (SHARED_LIMITER_KEYS) stays one quota
 * for every caller.
 */
type Key = Awaited<ReturnType<typeof stackKey>>;

const sharedLimiterKey = uniqueName('partner-shared');

describe('client namespace: two API keys share no cache entry, partition, limiter or requestId', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let a: Key;
  let b: Key;
  let target: Target;
  let other: Target;
  let out: ResultCollector;

  beforeAll(async () => {
    // A held sync call answers 202 after SYNC_TIMEOUT (25 s): far more than any call here needs.
    stack = await stackEnv({ SHARED_LIMITER_KEYS: sharedLimiterKey });
    running = await startStack(stack);
    await waitReady(stack);
    [a, b] = [await stackKey(stack), await stackKey(stack)];
    [target, other] = [await startTarget(), await startTarget()];
    out = new ResultCollector(stack.config.topicOut);
    await out.start();
  }, 120_000);

  afterAll(async () => {
    await out?.stop();
    await Promise.all([target?.close(), other?.close()]);
    await running?.shutdown('test over');
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const post = (key: Key, body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...key.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  /** A sync call that must be answered with its result (a 202 means it was held). */
  const call = async (key: Key, request: Record<string, unknown>, meta: Record<string, unknown> = {}) => {
    const reply = await post(key, { request, meta: { requestId: uniqueName('rq'), sync: true, ...meta } });
    expect(reply.status).toBe(200);
    return (await reply.json()) as ResultEnvelope;
  };
  const get = (key: Key, path: string) => fetch(`${stack.httpUrl}${path}`, { headers: key.headers });
  const callsTo = (t: Target, path: string) => t.calls.filter((c) => c.path === path).length;

  it('finding 1: B neither reads nor fills A’s cache entry, and a hit needs the request it answered', async () => {
    const k1 = { key: uniqueName('K1'), ttl: '5m' };
    const aPrivate = {
      uri: `${target.url}/echo/a-private?token=A`,
      method: 'POST',
      body: 'A-PRIVATE',
      headers: { 'x-owner': 'A-SECRET' },
    };
    const first = await call(a, aPrivate, { cache: k1 });
    expect(first.response.body).toBe('A-PRIVATE');
    expect(first.meta.cached).toBe(false);

    // The probe: B asks another target under A's key, and used to get A's body from the cache.
    const probe = await call(b, { uri: `${other.url}/other` }, { cache: k1 });
    expect(probe.meta.cached).toBe(false);
    expect(probe.response.body).toBe('status 200');
    expect(callsTo(other, '/other')).toBe(1);

    // B's exact copy of A's request is still B's own miss: A's entry is not B's to read.
    const copy = await call(b, aPrivate, { cache: k1 });
    expect(copy.meta.cached).toBe(false);
    expect(callsTo(target, '/echo/a-private?token=A')).toBe(2);

    // A's own call under its key, to another target or with another header, is a miss too.
    const elsewhere = await call(a, { uri: `${other.url}/elsewhere` }, { cache: k1 });
    expect(elsewhere).toMatchObject({ response: { body: 'status 200' }, meta: { cached: false } });
    const otherHeader = await call(a, { ...aPrivate, headers: { 'x-owner': 'SOMEONE-ELSE' } }, { cache: k1 });
    expect(otherHeader.meta.cached).toBe(false);
    expect(callsTo(target, '/echo/a-private?token=A')).toBe(3);

    // …and none of them replaced A's entry: A's request is answered from it.
    const again = await call(a, aPrivate, { cache: k1 });
    expect(again).toMatchObject({ response: { body: 'A-PRIVATE' }, meta: { cached: true } });
    expect(callsTo(target, '/echo/a-private?token=A')).toBe(3);

    // Poisoning: B fills a key first; A's call under that key still reaches A's target.
    const k2 = { key: uniqueName('K2'), ttl: '5m' };
    const poisoned = { uri: `${target.url}/echo/a-k2`, method: 'POST', body: 'B-POISON' };
    expect((await call(b, poisoned, { cache: k2 })).response.body).toBe('B-POISON');
    const honest = await call(a, { ...poisoned, body: 'A-K2' }, { cache: k2 });
    expect(honest).toMatchObject({ response: { body: 'A-K2' }, meta: { cached: false } });
  });

  it('finding 2: B’s head waiting on !order-42 does not hold A’s !order-42', async () => {
    const partition = `!order-42-${uniqueName('p')}`;
    const head = uniqueName('b-head');
    const retry = { max: 2, delay: '10m', maxDelay: '10m', jitter: 0 };
    const accepted = await post(b, {
      request: { uri: `${target.url}/status/500?id=${head}` },
      meta: { requestId: head, partition, retry },
    });
    expect(accepted.status).toBe(202);
    // B's first attempt failed: its task now holds the head of B's partition for 10 minutes.
    await expect
      .poll(async () => (await eventsOf(b, head)).some((e) => e.type === 'retry_scheduled'), {
        timeout: 30_000,
      })
      .toBe(true);

    const mine = await call(
      a,
      { uri: `${target.url}/echo`, method: 'POST', body: 'A-ordered' },
      { partition },
    );
    expect(mine.response).toMatchObject({ status: 200, body: 'A-ordered' });
    expect(out.byId.has(head)).toBe(false); // B's head is still waiting
  });

  // Calls with a target: a wake-up (empty uri) calls nobody, so no limiter takes it.
  it('finding 3: B spending a limiter key does not hold A’s calls under the same key', async () => {
    const limiter = {
      key: uniqueName('partner-quota'),
      algorithm: 'sliding-window-log',
      rates: [{ duration: '1h', value: 2 }],
    };
    for (let i = 0; i < 2; i++) {
      const spent = await call(b, { uri: `${target.url}/echo`, method: 'POST', body: `b-${i}` }, { limiter });
      expect(spent.meta.waitTime).toBe(0);
    }
    const mine = await call(a, { uri: `${target.url}/echo`, method: 'POST', body: 'a' }, { limiter });
    expect(mine).toMatchObject({ response: { status: 200, body: 'a' }, meta: { waitTime: 0 } });
  });

  it('finding 3: a limiter key the operator declared shared (SHARED_LIMITER_KEYS) is one quota for everyone', async () => {
    const limiter = {
      key: sharedLimiterKey,
      algorithm: 'sliding-window-log',
      rates: [{ duration: '1h', value: 2 }],
    };
    const request = { uri: `${target.url}/echo`, method: 'POST', body: 'shared' };
    for (let i = 0; i < 2; i++) await call(b, request, { limiter });
    const requestId = uniqueName('a-shared');
    const accepted = await post(a, { request, meta: { requestId, limiter } });
    expect(accepted.status).toBe(202);
    await expect
      .poll(async () => (await eventsOf(a, requestId)).find((e) => e.type === 'held'), { timeout: 30_000 })
      .toMatchObject({ type: 'held', by: 'limiter', client: a.name });
  });

  it('finding 4: B reusing A’s requestId is no 409 and reveals nothing; A’s own reuse still is', async () => {
    const id = uniqueName('rid');
    const mine = { request: { uri: '', body: 'A-first' }, meta: { requestId: id, sync: true } };
    const first = await post(a, mine);
    expect(first.status).toBe(200);
    expect(((await first.json()) as ResultEnvelope).response.body).toBe('A-first');

    const theirs = await post(b, {
      request: { uri: '', body: 'B-own' },
      meta: { requestId: id, sync: true },
    });
    expect(theirs.status).toBe(200);
    expect(((await theirs.json()) as ResultEnvelope).response.body).toBe('B-own');

    const reused = await post(a, { request: { uri: '', body: 'A-second' }, meta: { requestId: id } });
    expect(reused.status).toBe(409);
    expect(await reused.json()).toMatchObject({ code: 'request_id_conflict' });
    const retried = await post(a, mine);
    expect(retried.status).toBe(200);
    expect(((await retried.json()) as ResultEnvelope).response.body).toBe('A-first');

    // Every lookup by requestId answers each key with its own request.
    expect(await (await get(a, `/requests/${id}`)).json()).toMatchObject({ response: { body: 'A-first' } });
    expect(await (await get(b, `/requests/${id}`)).json()).toMatchObject({ response: { body: 'B-own' } });
    // The journal is written beside the result, not before it: a sync answer may come first.
    const completedOf = async (key: typeof a) =>
      (await eventsOf(key, id)).filter((e) => e.type === 'completed').length;
    await expect.poll(() => completedOf(a), { timeout: 30_000 }).toBe(1);
    await expect.poll(() => completedOf(b), { timeout: 30_000 }).toBe(1);
    const [aEvents, bEvents] = [await eventsOf(a, id), await eventsOf(b, id)];
    expect(aEvents.map((e) => e.client)).toEqual(aEvents.map(() => a.name));
    expect(bEvents.map((e) => e.client)).toEqual(bEvents.map(() => b.name));

    // On `out` both results keep the requestId the callers gave, each with its own meta.client.
    await out.until(() => (out.byId.get(id)?.length ?? 0) >= 2, 30_000, `both results of ${id}`);
    expect(out.byId.get(id)?.map((r) => [r.meta.requestId, r.meta.client, r.response.body])).toEqual(
      expect.arrayContaining([
        [id, a.name, 'A-first'],
        [id, b.name, 'B-own'],
      ]),
    );
  });

  it('finding 4: B claiming A’s predictable requestId first does not turn A’s real request into a 409', async () => {
    const id = uniqueName('predictable');
    expect((await post(b, { request: { uri: '', body: 'B-squat' }, meta: { requestId: id } })).status).toBe(
      202,
    );
    await out.until(() => out.byId.has(id), 30_000, `B's result of ${id}`);
    const real = await post(a, { request: { uri: '', body: 'A-real' }, meta: { requestId: id, sync: true } });
    expect(real.status).toBe(200);
    expect(await real.json()).toMatchObject({
      response: { body: 'A-real' },
      meta: { requestId: id, client: a.name },
    });
  });

  it('finding 4: a target that remembers Idempotency-Keys cannot answer B’s request with A’s of the same requestId', async () => {
    const id = uniqueName('idem');
    for (const [key, who] of [
      [a, 'a'],
      [b, 'b'],
    ] as const)
      await call(key, { uri: `${target.url}/echo?id=${id}&who=${who}` }, { requestId: id });
    const keyOf = (who: string) =>
      target.calls.find((c) => c.path === `/echo?id=${id}&who=${who}`)?.headers['idempotency-key'];
    expect(keyOf('a')).toMatch(/^[\da-f-]{36}$/);
    expect(keyOf('b')).toMatch(/^[\da-f-]{36}$/);
    expect(keyOf('a')).not.toBe(keyOf('b'));
  });

  async function eventsOf(key: Key, requestId: string): Promise<JournalEvent[]> {
    const reply = await get(key, `/requests/${encodeURIComponent(requestId)}/events`);
    if (reply.status === 404) return [];
    expect(reply.status).toBe(200);
    return ((await reply.json()) as { events: JournalEvent[] }).events;
  }
});
