import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import {
  CredentialUnknownError,
  envelope,
  ForbiddenError,
  get,
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  post,
  RateLimitedError,
  RequesterClient,
  RequestIdConflictError,
  requestId,
  scheduledAt,
  signedWith,
  UnauthorizedError,
  wakeUp,
} from '@requester/client';
import { verifySignature, verifyWebhook } from '@requester/client/receivers';
import { collectResults } from '@requester/example-kafka/consumer';
import { connectKafka } from '@requester/example-kafka/kafka';
import { produceRequests } from '@requester/example-kafka/producer';
import { createApp } from '@requester/example-partner-service';
import { type FakePartner, startFakePartner } from '@requester/example-partner-service/partner';
import { eventually, freePort, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * `@requester/client` against a whole Requester (one stack for the file): the HTTP API (send, a
 * sync call, its fallback to long-polls after 202, result, events, cancel), a typed error for
 * each refusal a caller can meet, signatures checked by the receivers, and the two examples
 * (`examples/partner-service` over HTTP, `examples/kafka` straight through Kafka).
 */
const EXAMPLES = fileURLToPath(new URL('../../../../examples/', import.meta.url));

/** An example's `main.ts` in a child process, as `pnpm start` runs it; its output once it exits or is stopped. */
function runExample(path: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [`${EXAMPLES}${path}`], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}

const HOOKS_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const XSIG_SECRET = `hex:${randomBytes(24).toString('hex')}`;

describe('end to end: @requester/client', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let partner: FakePartner;
  let caller: Awaited<ReturnType<typeof stackKey>>;
  let requester: RequesterClient;
  /** Every HTTP answer the client got, for the test that asserts how a sync call went. */
  const answers: Array<{ method: string; url: string; status: number; requestId: string | undefined }> = [];

  beforeAll(async () => {
    target = await startTarget();
    partner = await startFakePartner();
    // SYNC_TIMEOUT short: a sync call held by its target is answered 202 + Location in time.
    stack = await stackEnv({
      SYNC_TIMEOUT: '300ms',
      CREDENTIALS_MASTER_KEY: `e2e:${randomBytes(32).toString('base64')}`,
    });
    running = await startStack(stack);
    await waitReady(stack);
    caller = await stackKey(stack, { credentials: ['client-hooks', 'client-xsig', 'client-missing'] });
    requester = new RequesterClient({
      url: stack.httpUrl,
      apiKey: caller.token,
      fetch: async (input, init) => {
        const reply = await fetch(input, init);
        const body =
          typeof init?.body === 'string' ? (JSON.parse(init.body) as { meta?: { requestId?: string } }) : {};
        answers.push({
          method: init?.method ?? 'GET',
          url: String(input),
          status: reply.status,
          requestId: body.meta?.requestId,
        });
        return reply;
      },
    });
    const operator = await stackKey(stack, { admin: 'write' });
    for (const [name, signing] of [
      ['client-hooks', HOOKS_SECRET],
      ['client-xsig', XSIG_SECRET],
    ]) {
      const created = await fetch(`${stack.adminUrl}/admin/api/credentials/create`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...operator.headers },
        body: JSON.stringify({ name, secrets: { signing }, origins: [new URL(target.url).origin] }),
      });
      expect(created.status).toBe(200);
    }
  }, 120_000);

  afterAll(async () => {
    await running?.shutdown('test over');
    await Promise.all([target?.close(), partner?.close()]);
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('answers the README’s first request in three lines', async () => {
    const client = new RequesterClient({ url: stack.httpUrl, apiKey: caller.token });
    const result = await client.call(wakeUp(new Date(), { body: 'hello' }));
    expect(result.response).toMatchObject({ status: 200, body: 'hello' });
  });

  it('sends async, reads the result by long-poll and the request’s journal', async () => {
    const id = await requester.send(envelope(post(`${target.url}/echo`, { n: 1 })));
    const result = await requester.result(id, { waitMs: 30_000 });
    expect(result?.response.status).toBe(200);
    expect(result?.meta).toMatchObject({ requestId: id, client: caller.name, tryCount: 1 });
    expect(await requester.result(uniqueName('never-sent'))).toBeUndefined();
    await eventually(
      async () => (await requester.events(id)).some((e) => e.type === 'completed'),
      30_000,
      'the completed event in the journal',
    );
    expect((await requester.events(id)).map((e) => e.type)).toContain('accepted');
  });

  it('follows a sync call that outlasts SYNC_TIMEOUT with long-polls until the result', async () => {
    const key = uniqueName('hold');
    const id = uniqueName('sync');
    const calling = requester.call(envelope(get(`${target.url}/hold/${key}`), requestId(id)), {
      timeoutMs: 60_000,
    });
    // The target holds the call until the gateway has answered 202: the client then long-polls.
    await eventually(
      () => answers.some((a) => a.method === 'POST' && a.requestId === id && a.status === 202),
      30_000,
      'a 202 for the held sync call',
    );
    target.release(key);
    const result = await calling;
    expect(result.response.status).toBe(200);
    expect(result.meta.requestId).toBe(id);
    expect(answers.some((a) => a.method === 'GET' && a.url.includes(`/requests/${id}?wait=`))).toBe(true);
  });

  it('cancels: the one result is a 499 cancelled, and a second cancel answers the first', async () => {
    const id = await requester.send(
      envelope(get(`${target.url}/never`), scheduledAt(new Date(Date.now() + 3_600_000))),
    );
    const receipt = await requester.cancel(id);
    expect(receipt).toMatchObject({ requestId: id, first: true, by: `client:${caller.name}` });
    expect(await requester.cancel(id)).toMatchObject({ first: false, at: receipt.at });
    const result = await requester.result(id, { waitMs: 30_000 });
    expect(result?.response.status).toBe(499);
    expect(result?.meta.error?.code).toBe('cancelled');
    expect(result?.meta.cancelled?.by).toBe(`client:${caller.name}`);
  });

  it('throws the typed error of each refusal, with the fields the API returns', async () => {
    const request = envelope(get(`${target.url}/ok`));
    const refused = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: unknown) => e,
      );

    const stranger = new RequesterClient({ url: stack.httpUrl, apiKey: 'rqk_not_a_key' });
    expect(await refused(stranger.send(request))).toBeInstanceOf(UnauthorizedError);

    const invalid = await refused(requester.send({ request: { uri: 'ftp://nowhere' } }));
    expect(invalid).toBeInstanceOf(InvalidRequestError);
    expect((invalid as InvalidRequestError).issues.map((i) => i.path)).toEqual(['request.uri']);

    const noSync = new RequesterClient({
      url: stack.httpUrl,
      apiKey: (await stackKey(stack, { sync: false })).token,
    });
    const forbidden = await refused(noSync.call(request));
    expect(forbidden).toBeInstanceOf(ForbiddenError);
    expect(forbidden).toMatchObject({ status: 403, code: 'forbidden', requestId: request.meta.requestId });

    const id = uniqueName('conflict');
    await requester.send(envelope(get(`${target.url}/a`), requestId(id)));
    // The same request again is accepted (idempotent); another one under its id is a conflict.
    expect(await requester.send(envelope(get(`${target.url}/a`), requestId(id)))).toBe(id);
    expect(await refused(requester.send(envelope(get(`${target.url}/b`), requestId(id))))).toBeInstanceOf(
      RequestIdConflictError,
    );

    expect(await refused(requester.cancel(uniqueName('unknown')))).toBeInstanceOf(NotFoundError);

    const unknownCredential = await refused(
      requester.send({ request: request.request, meta: { credentials: 'client-missing' } }),
    );
    expect(unknownCredential).toBeInstanceOf(CredentialUnknownError);

    const small = new RequesterClient({
      url: stack.httpUrl,
      apiKey: (await stackKey(stack, { maxBodyBytes: 2_000 })).token,
    });
    expect(await refused(small.send(envelope(post(`${target.url}/big`, 'x'.repeat(4_000)))))).toBeInstanceOf(
      PayloadTooLargeError,
    );

    const limitedKey = await stackKey(stack, { rate: '1/m' });
    const limited = new RequesterClient({
      url: stack.httpUrl,
      apiKey: limitedKey.token,
      retry: { attempts: 1 },
    });
    await limited.send(envelope(get(`${target.url}/first`)));
    const rateLimited = await refused(limited.send(envelope(get(`${target.url}/second`))));
    expect(rateLimited).toBeInstanceOf(RateLimitedError);
    expect((rateLimited as RateLimitedError).retryAfter).toBeGreaterThan(0);
  });

  it('signs what the receivers verify: Standard Webhooks and X-Signature', async () => {
    for (const [keyId, path] of [
      ['client-hooks', 'hooks'],
      ['client-xsig', 'xsig'],
    ] as const) {
      const id = uniqueName(path);
      const result = await requester.call(
        envelope(post(`${target.url}/${path}/${id}`, { id }), signedWith(keyId)),
      );
      expect(result.response.status).toBe(200);
      const received = target.calls.find((call) => call.path === `/${path}/${id}`);
      if (!received) throw new Error(`the target did not receive ${id}`);
      const verify = { headers: received.headers, body: received.body };
      if (keyId === 'client-hooks') {
        await expect(verifyWebhook({ ...verify, secrets: HOOKS_SECRET })).resolves.toMatchObject({
          id: expect.stringMatching(/^msg_/),
        });
        await expect(
          verifyWebhook({ ...verify, secrets: [`whsec_${randomBytes(24).toString('base64')}`] }),
        ).rejects.toThrow();
      } else {
        await expect(verifySignature({ ...verify, secrets: XSIG_SECRET })).resolves.toBeUndefined();
        await expect(
          verifySignature({ ...verify, body: `${received.body} `, secrets: XSIG_SECRET }),
        ).rejects.toThrow();
      }
    }
  });

  it('runs examples/partner-service: a Hono service calling its partner through Requester', async () => {
    const app = createApp({ requester, partnerUrl: partner.url });
    const quote = await app.request('/quotes/apple');
    expect(quote.status).toBe(200);
    expect(await quote.json()).toEqual({ sku: 'apple', price: 42 });
    const orderId = uniqueName('order');
    const order = { id: orderId, items: [{ sku: 'apple', quantity: 3 }] };
    const placed = await app.request('/orders', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(order),
    });
    expect(placed.status).toBe(202);
    expect(await placed.json()).toEqual({ requestId: `order-${orderId}` });
    await eventually(
      async () => (await app.request(`/orders/${orderId}/delivery`)).status === 200,
      30_000,
      'the order delivered',
    );
    expect(await (await app.request(`/orders/${orderId}/delivery`)).json()).toEqual({
      partnerStatus: 201,
      attempts: 1,
    });
    expect(partner.orders).toContainEqual(order);
  });

  it('runs examples/kafka: ordered requests written to in, their results read from out', async () => {
    const kafka = await connectKafka({
      brokers: [stack.env.KAFKA_BROKERS ?? '127.0.0.1:9092'],
      groupId: uniqueName('example'),
    });
    try {
      const ids = await produceRequests(kafka.producer, {
        topic: stack.config.topicIn,
        targetUrl: target.url,
        count: 3,
      });
      const results = await collectResults(kafka.consumer, ids, {
        topic: stack.config.topicOut,
        signal: AbortSignal.timeout(45_000),
      });
      expect([...results.keys()].sort()).toEqual([...ids].sort());
      expect(ids.map((id) => results.get(id)?.response.status)).toEqual([200, 200, 200]);
      expect(ids.map((id) => results.get(id)?.meta.proxyData)).toEqual([
        { step: 0 },
        { step: 1 },
        { step: 2 },
      ]);
      // One ordered partition: the target saw the steps in the order they were written.
      const steps = target.calls.filter((call) => call.path.startsWith('/steps/')).map((call) => call.path);
      expect(steps).toEqual(['/steps/0', '/steps/1', '/steps/2']);
    } finally {
      await kafka.close();
    }
  });

  it('runs the examples’ entry points as `pnpm start` does', async () => {
    const kafka = runExample('kafka/src/main.ts', {
      KAFKA_BROKERS: stack.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
      KAFKA_TOPIC_IN: stack.config.topicIn,
      KAFKA_TOPIC_OUT: stack.config.topicOut,
    });
    expect(await kafka.exited, kafka.output()).toBe(0);
    expect(kafka.output().match(/ 200 step \d/g)).toHaveLength(3);

    const port = await freePort();
    const service = runExample('partner-service/src/main.ts', {
      REQUESTER_URL: stack.httpUrl,
      REQUESTER_API_KEY: caller.token,
      PARTNER_URL: partner.url,
      PORT: String(port),
    });
    try {
      await eventually(
        () => service.output().includes('partner-service on'),
        30_000,
        'the service listening',
        service.output,
      );
      const quote = await fetch(`http://127.0.0.1:${port}/quotes/pear`);
      expect(await quote.json()).toEqual({ sku: 'pear', price: 42 });
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  });
});
