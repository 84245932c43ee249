import { request as httpRequest } from 'node:http';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  type ResultCollector,
  type StackEnv,
  stackKey,
  startStackUnderTest,
  stopStackUnderTest,
} from './stack.fixture.ts';

/**
 * Fair at the door (issue 19, finding 6; docs/architecture.md §11): one key's abuse is answered to
 * that key (429) and to nobody else. The instance's bounds are small here so that one key could
 * fill them: 256 KiB of bodies in flight (64 KiB per key), 4 waiting callers (2 per key), one
 * journal lookup at a time per key.
 */
describe('fair at the door: per-key budgets', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let results: ResultCollector;
  let a: Awaited<ReturnType<typeof stackKey>>;
  let b: Awaited<ReturnType<typeof stackKey>>;
  const cleanups: Array<() => void> = [];

  beforeAll(async () => {
    ({ stack, running, results } = await startStackUnderTest({
      MAX_BODY_BYTES: '65536',
      MAX_BODY_BYTES_IN_FLIGHT: '262144',
      MAX_BODY_BYTES_IN_FLIGHT_PER_KEY: '65536',
      SYNC_MAX_WAITERS: '4',
      SYNC_MAX_WAITERS_PER_KEY: '2',
      EVENTS_MAX_LOOKUPS_PER_KEY: '1',
    }));
    a = await stackKey(stack);
    b = await stackKey(stack);
  }, 120_000);

  afterAll(async () => {
    for (const cleanup of cleanups) cleanup();
    await stopStackUnderTest({ stack, running, results });
  }, 60_000);

  /** A POST /request that declares `declared` bytes, sends `sent` of them, then stays silent. */
  function stalledUpload(key: { headers: Record<string, string> }, declared: number, sent: number) {
    const req = httpRequest(`${stack.httpUrl}/request`, {
      method: 'POST',
      agent: false,
      headers: { ...key.headers, 'content-type': 'application/json', 'content-length': String(declared) },
    });
    const status = new Promise<number>((resolve) => {
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
    });
    req.on('error', () => {}); // destroyed at the end of the test
    req.write(Buffer.alloc(sent, ' ')); // JSON allows leading whitespace: a body that never ends
    cleanups.push(() => req.destroy());
    return status;
  }

  const post = (key: { headers: Record<string, string> }, body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...key.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it("checks a key's rate before reading its body: an upload over the rate is answered 429 while it stalls", async () => {
    const limited = await stackKey(stack, { rate: '1/1h' });
    expect(
      (await post(limited, { request: { uri: '' }, meta: { requestId: uniqueName('first') } })).status,
    ).toBe(202);
    expect(await stalledUpload(limited, 1_000, 10)).toBe(429);
  });

  it("one key's stalled uploads fill its own share (429), and another key's POST /request is still accepted", async () => {
    // 20 uploads of 16 KiB from B: 320 KiB, more than the whole instance holds.
    const uploads = Array.from({ length: 20 }, () => stalledUpload(b, 60_000, 16_384));
    expect(await Promise.race(uploads)).toBe(429);
    // Over a third of a body's worth of the instance's budget is more than any refusal leaves free
    // when one key can fill the instance (each refusal leaves less than two chunks): 48 KiB.
    const requestId = uniqueName('a-big');
    const accepted = await post(a, {
      request: { uri: '', body: 'x'.repeat(48 * 1024) },
      meta: { requestId },
    });
    expect(accepted.status).toBe(202);
  });

  it("one key's long-polls beyond its share are answered 429, and another key still long-polls its result", async () => {
    const abort = new AbortController();
    cleanups.push(() => abort.abort());
    const answered: number[] = [];
    for (let i = 0; i < 4; i++) {
      const id = uniqueName('b-poll');
      void fetch(`${stack.httpUrl}/requests/${id}?wait=60s`, {
        headers: b.headers,
        signal: abort.signal,
      }).then(
        (reply) => answered.push(reply.status),
        () => {},
      );
    }
    await expect.poll(() => answered.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    expect(answered).toEqual([429, 429]);

    const requestId = uniqueName('a-poll');
    expect((await post(a, { request: { uri: '', body: 'mine' }, meta: { requestId } })).status).toBe(202);
    const mine = await fetch(`${stack.httpUrl}/requests/${requestId}?wait=30s`, { headers: a.headers });
    expect(mine.status).toBe(200);
    expect(await mine.json()).toMatchObject({ response: { body: 'mine' }, meta: { client: a.name } });
    abort.abort();
  });

  it("one key's concurrent journal lookups beyond its share are answered 429, and another key's lookup is served", async () => {
    const requestId = uniqueName('a-events');
    expect((await post(a, { request: { uri: '' }, meta: { requestId } })).status).toBe(202);
    await results.one(requestId);
    const events = () => fetch(`${stack.httpUrl}/requests/${requestId}/events`, { headers: a.headers });
    await expect.poll(async () => (await events()).status, { timeout: 30_000 }).toBe(200);

    const flood = Array.from({ length: 30 }, () =>
      fetch(`${stack.httpUrl}/requests/${uniqueName('b-events')}/events`, { headers: b.headers }).then(
        (r) => r.status,
      ),
    );
    const [mine, ...theirs] = await Promise.all([events().then((r) => r.status), ...flood]);
    expect(mine).toBe(200);
    expect(theirs).toContain(429);
    expect(theirs.every((status) => status === 404 || status === 429)).toBe(true);
  });
});
