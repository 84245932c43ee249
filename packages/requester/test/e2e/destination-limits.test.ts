import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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
 * A destination's max concurrency and attempt timeout (issue 44), pinned over what the caller
 * asks: counted by the calls in flight at a real loopback target, and by a call that hangs.
 */
const MAX_CONCURRENCY = 2;

/** Counts the calls in flight (the most seen); `/slow` answers after a while, `/hang` never does. */
async function countingTarget() {
  let inFlight = 0;
  let most = 0;
  const server: Server = createServer((req, res) => {
    req.resume();
    if (req.url?.startsWith('/hang')) return;
    inFlight += 1;
    most = Math.max(most, inFlight);
    setTimeout(() => {
      inFlight -= 1;
      res.end('ok');
    }, 30);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    most: () => most,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('a destination’s max concurrency and timeout', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Awaited<ReturnType<typeof countingTarget>>;
  let results: ResultCollector;
  let operator: Awaited<ReturnType<typeof stackKey>>;
  let caller: Awaited<ReturnType<typeof stackKey>>;

  const post = (body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...caller.headers },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    target = await countingTarget();
    ({ stack, running, results } = await startStackUnderTest());
    operator = await stackKey(stack, { admin: 'write' });
    caller = await stackKey(stack);
    for (const [name, spec] of [
      ['capped', { baseUrl: target.url, maxConcurrency: MAX_CONCURRENCY }],
      ['timed', { baseUrl: target.url, timeout: '300ms' }],
    ] as const) {
      const created = await fetch(`${stack.adminUrl}/admin/api/destinations/create`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...operator.headers },
        body: JSON.stringify({ name, spec }),
      });
      expect(created.status, await created.text()).toBe(200);
    }
  }, 180_000);

  afterAll(async () => {
    await stopStackUnderTest({ stack, running, results });
    await target?.close();
  }, 60_000);

  it('holds its calls in flight to its max, whatever concurrency the caller asks for', async () => {
    const ids = Array.from({ length: 30 }, () => uniqueName('cap'));
    for (const [i, requestId] of ids.entries()) {
      const meta = { requestId, destination: 'capped', concurrency: { key: 'mine', limit: 50 } };
      const accepted = await post({ request: { uri: `/slow?n=${i}` }, meta });
      expect(accepted.status).toBe(202);
    }
    for (const id of ids) expect((await results.one(id, 60_000)).response.status).toBe(200);
    expect(target.most()).toBeLessThanOrEqual(MAX_CONCURRENCY);
  }, 120_000);

  it('cuts a call at its timeout, a caller’s longer one giving way', async () => {
    const requestId = uniqueName('timed');
    const accepted = await post({
      request: { uri: '/hang' },
      meta: { requestId, destination: 'timed', timeout: '1m' },
    });
    expect(accepted.status).toBe(202);
    const result = await results.one(requestId, 60_000);
    expect(result.meta.error?.code).toBe('timeout');
    expect(result.meta.error?.message).toContain('300 ms');
  }, 120_000);
});
