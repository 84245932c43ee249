import { type KafkaRecord, parseDeadLetter, replayEnvelope } from '@requester/shared';
import { readTopic, startTarget, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStandardWebhook } from '../../../executor/src/signing/verify.fixture.ts';
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
 * The delivery policies across every role (docs/architecture.md §5): waits beyond the Redis horizon leave
 * through the PostgreSQL outbox and come back through relay → in → router → queue; failures for
 * good land on the DLQ topic beside their result; signing secrets stay in the server's config.
 */
describe('end to end: delivery policies through every role', () => {
  const secret = `whsec_${Buffer.from('an-end-to-end-signing-secret').toString('base64')}`;
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let key: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    target = await startTarget();
    stack = await stackEnv({ MAX_WORKERS: '16', REDIS_HORIZON: '1s', SIGNING_KEYS: `partner=${secret}` });
    running = await startStack(stack);
    await waitReady(stack);
    // A signing key id is within the credentials scope, SIGNING_KEYS' (deprecated) as the store's.
    key = await stackKey(stack, { credentials: ['partner', 'nobody'] });
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
  }, 120_000);

  afterAll(async () => {
    await results?.stop();
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const post = async (body: unknown) => {
    const reply = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...key.headers },
      body: JSON.stringify(body),
    });
    expect(reply.status).toBe(202);
  };
  const callsWith = (marker: string) => target.calls.filter((c) => c.path.includes(marker));

  it('a Retry-After beyond the horizon waits in the outbox and the retry succeeds (tryCount 2, ≥ 2 s later)', async () => {
    await post({
      request: { uri: `${target.url}/flaky/e2e-after/1?status=429&retry-after=2` },
      meta: { requestId: 'e2e-after', retry: { max: 3, delay: '100ms' } },
    });
    const result = await results.one('e2e-after', 30_000);
    expect(result).toMatchObject({ response: { status: 200 }, meta: { tryCount: 2 } });
    const [first, second] = callsWith('/flaky/e2e-after/');
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(2_000);
    expect(results.byId.get('e2e-after')).toHaveLength(1);
  });

  it('a limiter wait beyond the horizon comes back through the outbox, its waitTime reported', async () => {
    const limiter = {
      key: 'e2e-lim',
      algorithm: 'sliding-window-log',
      rates: [{ duration: '3s', value: 1 }],
    };
    // A target of its own: the 429 of the test before paces the shared target's origin for a while,
    // and a pacing wait would add to waitTime.
    const own = await startTarget();
    try {
      for (const requestId of ['e2e-lim-1', 'e2e-lim-2'])
        await post({ request: { uri: `${own.url}/echo?id=${requestId}` }, meta: { requestId, limiter } });
      const both = [await results.one('e2e-lim-1', 30_000), await results.one('e2e-lim-2', 30_000)];
      expect(both.map((r) => r.response.status)).toEqual([200, 200]);
      expect(both.map((r) => r.meta.tryCount)).toEqual([1, 1]); // a wait is not an attempt
      const waited = both.map((r) => r.meta.waitTime).sort((a, b) => a - b);
      expect(waited[0]).toBe(0);
      expect(waited[1]).toBeGreaterThan(1e9); // longer than the 1 s horizon: it went through the outbox
      expect(own.calls.filter((c) => c.path.includes('/echo?id=e2e-lim-'))).toHaveLength(2);
    } finally {
      await own.close();
    }
  });

  it('a failure for good is answered on out and dead-lettered on the DLQ topic, ready for replay', async () => {
    await post({
      request: { uri: `${target.url}/status/404?id=e2e-dead` },
      meta: { requestId: 'e2e-dead', retry: { max: 3 }, proxyData: { tenant: 't1' } },
    });
    const result = await results.one('e2e-dead', 30_000);
    expect(result).toMatchObject({ response: { status: 404 }, meta: { tryCount: 1 } });
    const letters = await readTopic(stack.config.topicDlq, (seen) => seen.some(keyed('e2e-dead')));
    const record = parseDeadLetter(letters.find(keyed('e2e-dead'))?.value);
    expect(record).toMatchObject({
      reason: 'permanent',
      result,
      envelope: { meta: { requestId: 'e2e-dead' } },
    });
    expect(record.source?.topic).toBe(stack.config.topicIn);
    expect(replayEnvelope(record)).toMatchObject({ tryCount: 1, retryBase: 1 });
  });

  it('signs with a server-side key (verified independently); an unknown key id is refused; the secret and the API key are in no topic', async () => {
    const body = '{"shipment":7}';
    await post({
      request: { uri: `${target.url}/echo?id=e2e-signed`, method: 'POST', body },
      meta: { requestId: 'e2e-signed', signing: { keyId: 'partner' } },
    });
    await post({
      request: { uri: `${target.url}/echo?id=e2e-unknown-key`, method: 'POST', body },
      meta: { requestId: 'e2e-unknown-key', signing: { keyId: 'nobody' } },
    });
    expect((await results.one('e2e-signed', 30_000)).response.status).toBe(200);
    const [call] = callsWith('id=e2e-signed');
    const headers = call!.headers as Record<string, string>;
    expect(verifyStandardWebhook(secret, headers, call!.body, Date.now() / 1000)).toBe(true);
    expect(await results.one('e2e-unknown-key', 30_000)).toMatchObject({
      response: { status: 400 },
      meta: { tryCount: 0, error: { code: 'invalid_request' } },
    });
    expect(callsWith('id=e2e-unknown-key')).toHaveLength(0);

    const { topicIn, topicOut, topicDlq } = stack.config;
    const written = await Promise.all([
      readTopic(topicIn, (seen) => seen.some(keyed('e2e-signed')) && seen.some(keyed('e2e-unknown-key'))),
      readTopic(topicOut, (seen) => seen.some(keyed('e2e-signed')) && seen.some(keyed('e2e-unknown-key'))),
      readTopic(topicDlq, (seen) => seen.some(keyed('e2e-unknown-key'))),
    ]);
    const text = written
      .flat()
      .map((m) => `${m.value?.toString()} ${JSON.stringify(m.headers)}`)
      .join('\n');
    expect(text).toContain('e2e-signed');
    for (const part of [secret, secret.slice(6), 'an-end-to-end-signing-secret'])
      expect(text).not.toContain(part);
    // The caller's API key neither: only its name travels (meta.client), in the dead letter too.
    // The secret is everything after `rqk_<id>_`: base64url may itself hold `_`, so split once.
    const keySecret = key.token.slice(key.token.indexOf('_', 'rqk_'.length) + 1);
    expect(keySecret.length).toBeGreaterThanOrEqual(40);
    expect(text).not.toContain(keySecret);
    expect(text).toContain(`"client":"${key.name}"`);
  });
});

function keyed(requestId: string) {
  return (message: KafkaRecord) => message.key?.toString() === requestId;
}
