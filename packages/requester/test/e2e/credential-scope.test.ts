import { randomBytes } from 'node:crypto';
import type { KafkaProducer, ResultEnvelope } from '@requester/shared';
import {
  type ProtectedTarget,
  startProtectedTarget,
  startTarget,
  startTokenEndpoint,
  type Target,
  type TokenEndpoint,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  kafkaProducer,
  type ResultCollector,
  type StackEnv,
  stackKey,
  startStackUnderTest,
  stopStackUnderTest,
} from './stack.fixture.ts';

/**
 * Issue 40, findings 1 and 2: a credential goes only where it belongs. A key allowed the host
 * 127.0.0.1 and the credential `partner-pay` named it for a listener of its own and got the live
 * token; a record written straight to `in` with no client did the same. Now the credential is
 * bound to its origins (refused at the door, and again by the executor for what comes by Kafka),
 * and a record written straight to `in` may name it only under a Kafka-entry client whose key
 * lists it.
 */
const CLIENT = { id: 'requester-pay', secret: `cs-${randomBytes(16).toString('hex')}` };

describe('a credential goes only where it belongs', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let producer: KafkaProducer;
  let tokens: TokenEndpoint;
  let partner: ProtectedTarget;
  let listener: Target;
  let results: ResultCollector;
  let c: Awaited<ReturnType<typeof stackKey>>;
  let entry: Awaited<ReturnType<typeof stackKey>>;
  let entryUnscoped: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    tokens = await startTokenEndpoint(CLIENT);
    partner = await startProtectedTarget({ tokens });
    listener = await startTarget();
    ({ stack, running, results } = await startStackUnderTest({
      KAFKA_TOPIC_PARTITIONS: '1',
      CREDENTIALS_MASTER_KEY: `e2e:${randomBytes(32).toString('base64')}`,
      CREDENTIALS_CACHE_TTL: '200ms',
    }));
    producer = await kafkaProducer();
    const operator = await stackKey(stack, { admin: 'write' });
    const created = await fetch(`${stack.adminUrl}/admin/api/credentials/create`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operator.headers },
      body: JSON.stringify({
        name: 'partner-pay',
        secrets: {
          oauth2: {
            tokenUrl: tokens.url,
            clientId: CLIENT.id,
            clientSecret: CLIENT.secret,
            scope: 'payments',
          },
        },
        origins: [new URL(partner.url).origin],
      }),
    });
    expect(created.status, await created.text()).toBe(200);
    c = await stackKey(stack, { hosts: ['127.0.0.1'], credentials: ['partner-pay'] });
    entry = await stackKey(stack, { kafkaEntry: true, credentials: ['partner-pay'] });
    entryUnscoped = await stackKey(stack, { kafkaEntry: true });
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    await stopStackUnderTest({ stack, running, results });
    await Promise.all([tokens?.close(), partner?.close(), listener?.close()]);
  }, 60_000);

  const post = (body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...c.headers },
      body: JSON.stringify(body),
    });
  const named = (requestId: string, uri: string, meta: Record<string, unknown> = {}) => ({
    request: { uri, method: 'GET' },
    meta: { requestId, credentials: 'partner-pay', ...meta },
  });
  const bearers = () => listener.calls.filter((call) => call.headers.authorization !== undefined);

  it('over HTTP: the token goes to the partner’s origin, never to a listener of the caller on another port', async () => {
    const stolen = await post(named(uniqueName('steal'), `${listener.url}/hello`, { sync: true }));
    expect(stolen.status).toBe(403);
    expect(await stolen.json()).toMatchObject({
      code: 'credential_origin_refused',
      issues: [{ path: 'meta.credentials' }],
    });
    // Nor by a Host header asking the partner's address to route it to another name.
    const vhost = await post({
      request: { uri: partner.url, headers: { Host: 'evil.example' } },
      meta: { requestId: uniqueName('vhost'), credentials: 'partner-pay' },
    });
    expect(vhost.status).toBe(400);
    const paid = uniqueName('paid');
    expect((await post(named(paid, partner.url))).status).toBe(202);
    expect((await results.one(paid)).response.status).toBe(200);
    expect(bearers()).toEqual([]);
  });

  it('from Kafka: no client, or a client whose key does not list it, may not use the credential', async () => {
    const anonymous = uniqueName('anon');
    const unscoped = uniqueName('unscoped');
    const scoped = uniqueName('scoped');
    const value = (id: string, uri: string, meta: Record<string, unknown> = {}) =>
      JSON.stringify(named(id, uri, meta));
    const fetchesBefore = tokens.requests.length;
    await producer.send(stack.config.topicIn, [
      // The probe's record: no meta.client, the credential, the writer's own listener.
      { key: anonymous, value: value(anonymous, `${listener.url}/hello`) },
      { key: unscoped, value: value(unscoped, partner.url, { client: entryUnscoped.name }) },
      { key: scoped, value: value(scoped, partner.url, { client: entry.name }) },
    ]);
    for (const id of [anonymous, unscoped]) {
      const refused = await results.one(id);
      expect(refused.response.status).toBe(403);
      expect(refused.meta.error).toMatchObject({
        code: 'forbidden',
        message: expect.stringContaining('partner-pay'),
      });
    }
    const allowed = (await results.one(scoped)) as ResultEnvelope;
    expect(allowed.response.status).toBe(200);
    expect(allowed.meta.client).toBe(entry.name);
    expect(bearers()).toEqual([]);
    // The refused ones asked for no token either: at most the allowed call's fetch.
    expect(tokens.requests.length - fetchesBefore).toBeLessThanOrEqual(1);
  });

  it('from Kafka, a client allowed the credential still cannot send it to another origin: the executor refuses it', async () => {
    const elsewhere = uniqueName('elsewhere');
    await producer.send(stack.config.topicIn, [
      {
        key: elsewhere,
        value: JSON.stringify(named(elsewhere, `${listener.url}/hello`, { client: entry.name })),
      },
    ]);
    const refused = await results.one(elsewhere);
    expect(refused.response.status).toBe(403);
    expect(refused.meta.error).toMatchObject({ code: 'credential_origin_refused' });
    expect(listener.calls).toEqual([]);
  });
});
