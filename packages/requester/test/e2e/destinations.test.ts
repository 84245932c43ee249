import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KafkaProducer } from '@requester/shared';
import {
  eventually,
  freePort,
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
import { type ArrivalTarget, busiestWindow, callsByExecutor, startArrivalTarget } from './arrival.fixture.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  spawnRequester,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * Destinations (issue 44): a partner API defined once by operators, named by requests with a
 * relative URI. Its base URL, headers, credential, limiter and retries are the operator's; a
 * caller asking for a higher rate gets the destination's (by arrival time at a real target, with
 * a second executor process), absolute URIs and escapes are refused, a key limited to destinations
 * calls nothing else, and the destination's credential goes only to its origin.
 */
const CLIENT = { id: 'requester-pay', secret: `cs-${randomBytes(16).toString('hex')}` };
const LIMIT = 5;
const WINDOW_MS = 1_000;
const PACED = 20;
/** CREDENTIALS_CACHE_TTL of the stack: how long each process trusts a credential or destination it read. */
const CACHE_TTL_MS = 200;
const API_KEY = `sk-${randomBytes(16).toString('hex')}`;

describe('destinations', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let second: ReturnType<typeof spawnRequester> | undefined;
  let secondAdminUrl: string;
  let producer: KafkaProducer;
  let tokens: TokenEndpoint;
  let partner: ProtectedTarget;
  let target: Target;
  let arrivals: ArrivalTarget;
  let results: ResultCollector;
  let operator: Awaited<ReturnType<typeof stackKey>>;
  let caller: Awaited<ReturnType<typeof stackKey>>;

  const admin = (verb: string, body: unknown) =>
    fetch(`${stack.adminUrl}/admin/api/destinations/${verb}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operator.headers },
      body: JSON.stringify(body),
    });
  const post = (body: unknown, key = caller) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...key.headers },
      body: JSON.stringify(body),
    });
  const to = (destination: string, uri: string, meta: Record<string, unknown> = {}, request = {}) => ({
    request: { uri, ...request },
    meta: { requestId: uniqueName('d'), destination, ...meta },
  });

  beforeAll(async () => {
    tokens = await startTokenEndpoint(CLIENT);
    partner = await startProtectedTarget({ tokens });
    target = await startTarget();
    arrivals = await startArrivalTarget();
    stack = await stackEnv({
      KAFKA_TOPIC_PARTITIONS: '1',
      CREDENTIALS_MASTER_KEY: `e2e:${randomBytes(32).toString('base64')}`,
      CREDENTIALS_CACHE_TTL: `${CACHE_TTL_MS}ms`,
      METRICS_SAMPLE_INTERVAL: '300ms',
    });
    running = await startStack(stack);
    await waitReady(stack);
    // A second executor, a process of its own: the destination's quota is one for both.
    secondAdminUrl = `http://127.0.0.1:${await freePort()}`;
    second = spawnRequester(
      { ...stack, env: { ...stack.env, ADMIN_PORT: new URL(secondAdminUrl).port } },
      'executor',
    );
    await waitReady({ ...stack, adminUrl: secondAdminUrl });
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    producer = await kafkaProducer();
    operator = await stackKey(stack, { admin: 'write' });
    caller = await stackKey(stack);
    const credential = await fetch(`${stack.adminUrl}/admin/api/credentials/create`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operator.headers },
      body: JSON.stringify({
        name: 'partner-pay',
        secrets: { oauth2: { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret } },
        origins: [new URL(partner.url).origin],
      }),
    });
    expect(credential.status, await credential.text()).toBe(200);
    for (const [name, spec] of [
      ['plain', { baseUrl: `${target.url}/api/`, headers: { 'X-Partner': 'requester' }, retry: { max: 1 } }],
      ['pay', { baseUrl: partner.url, credentials: 'partner-pay' }],
      ['keyed', { baseUrl: target.url, secretHeaders: { 'X-Api-Key': API_KEY } }],
      [
        'paced',
        {
          baseUrl: arrivals.url,
          limiter: { algorithm: 'sliding-window-log', rates: [{ duration: `${WINDOW_MS}ms`, value: LIMIT }] },
        },
      ],
    ] as const) {
      const created = await admin('create', { name, spec });
      expect(created.status, await created.text()).toBe(200);
    }
  }, 180_000);

  afterAll(async () => {
    await producer?.disconnect();
    await results?.stop();
    if (second) {
      second.child.kill('SIGTERM');
      await second.exited;
    }
    await running?.shutdown('test over');
    await Promise.all([tokens?.close(), partner?.close(), target?.close(), arrivals?.close()]);
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('over HTTP and Kafka: the base URL before the relative URI, the static headers over the caller’s', async () => {
    const http = to(
      'plain',
      '/v2/invoices?x=1',
      {},
      { headers: { 'x-partner': 'forged', accept: 'text/plain' } },
    );
    expect((await post(http)).status).toBe(202);
    const viaKafka = to('plain', '/v2/kafka');
    await producer.send(stack.config.topicIn, [
      { key: viaKafka.meta.requestId, value: JSON.stringify(viaKafka) },
    ]);
    for (const [sent, path] of [
      [http, '/api/v2/invoices?x=1'],
      [viaKafka, '/api/v2/kafka'],
    ] as const) {
      const result = await results.one(sent.meta.requestId);
      expect(result.response.status).toBe(200);
      expect(result.meta.destination).toEqual({ name: 'plain', version: 1, retryMax: 1 });
      const call = target.calls.find((c) => c.path === path);
      expect(call?.headers['x-partner']).toBe('requester');
    }
    expect(target.calls.find((c) => c.path === '/api/v2/invoices?x=1')?.headers.accept).toBe('text/plain');
  });

  it('secret headers: sent by the executor, never shown nor written to out', async () => {
    const sent = to('keyed', '/keyed');
    expect((await post(sent)).status).toBe(202);
    const result = await results.one(sent.meta.requestId);
    expect(result.response.status).toBe(200);
    expect(target.calls.find((c) => c.path === '/keyed')?.headers['x-api-key']).toBe(API_KEY);
    expect(JSON.stringify(result)).not.toContain(API_KEY);
    const listed = await (
      await fetch(`${stack.adminUrl}/admin/api/destinations`, { headers: operator.headers })
    ).text();
    expect(listed).toContain('"secretHeaderNames":["X-Api-Key"]');
    expect(listed).not.toContain(API_KEY);
  });

  it('an update is a new version, in force for the next attempts', async () => {
    const updated = await admin('update', { name: 'plain', spec: { headers: { 'X-Partner': 'v2' } } });
    const text = await updated.text();
    expect(updated.status, text).toBe(200);
    expect(JSON.parse(text)).toMatchObject({ version: 2, baseUrl: `${target.url}/api` });
    const listed = await fetch(`${stack.adminUrl}/admin/api/destinations/plain`, {
      headers: operator.headers,
    });
    const shown = (await listed.json()) as { versions: Array<{ version: number }> };
    expect(shown.versions.map((v) => v.version)).toEqual([2, 1]);
    // Within CREDENTIALS_CACHE_TTL every process reads the new version.
    let version = 0;
    for (let i = 0; i < 50 && version !== 2; i++) {
      const sent = to('plain', `/v2/after-${i}`);
      expect((await post(sent)).status).toBe(202);
      version = (await results.one(sent.meta.requestId)).meta.destination?.version ?? 0;
    }
    expect(version).toBe(2);
    expect(target.calls.at(-1)?.headers['x-partner']).toBe('v2');
  });

  it('a paused destination holds the calls naming it, not another destination’s on the same origin', async () => {
    const pauses = (path: string, body: unknown) =>
      fetch(`${stack.adminUrl}/admin/api/pauses${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...operator.headers },
        body: JSON.stringify(body),
      });
    const paused = await pauses('', { scope: 'destination', value: 'keyed' });
    expect(paused.status, await paused.text()).toBe(200);
    const held = to('keyed', '/held');
    const free = to('plain', '/v2/free');
    expect((await post(held)).status).toBe(202);
    expect((await post(free)).status).toBe(202);
    // Both destinations call the same target: only the one paused waits.
    expect((await results.one(free.meta.requestId)).response.status).toBe(200);
    await eventually(
      async () => {
        const story = (await (
          await fetch(`${stack.adminUrl}/admin/api/requests/${held.meta.requestId}/events`, {
            headers: operator.headers,
          })
        ).json()) as { events: Array<Record<string, unknown>> };
        return story.events.some((e) => e.type === 'held' && e.by === 'pause');
      },
      30_000,
      'the request to the paused destination held by the pause',
    );
    expect(target.calls.some((c) => c.path === '/held')).toBe(false);
    const resumed = await pauses('/resume', { scope: 'destination', value: 'keyed' });
    expect(resumed.status, await resumed.text()).toBe(200);
    expect((await results.one(held.meta.requestId)).response.status).toBe(200);
    expect(target.calls.filter((c) => c.path === '/held')).toHaveLength(1);
  });

  it('the operator UI: the page lists them, its form makes a new version', async () => {
    const form = await fetch(`${stack.adminUrl}/admin/api/destinations/update`, {
      method: 'POST',
      headers: { 'hx-request': 'true', ...operator.headers },
      body: new URLSearchParams({ name: 'plain', baseUrl: '', maxBodyBytes: '65536' }),
    });
    expect(form.status, await form.text()).toBe(200);
    const live = await fetch(`${stack.adminUrl}/ui/destinations/live`, { headers: operator.headers });
    const text = await live.text();
    expect(live.status).toBe(200);
    expect(text).toContain('data-destination="plain"');
    expect(text).toContain('65536');
    expect(text).toContain('sliding-window-log 5/1000ms');
  });

  it('refuses absolute URIs, escapes, unknown destinations with a 400 (an error result on Kafka)', async () => {
    for (const uri of [`${target.url}/x`, '//evil.example/x', '/a/../../x', '/%2e%2e/x', '/a\\b']) {
      const reply = await post(to('plain', uri));
      expect(reply.status, uri).toBe(400);
      expect(await reply.json()).toMatchObject({
        code: 'invalid_request',
        issues: [{ path: 'request.uri' }],
      });
    }
    const unknown = await post(to('nope', '/x'));
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ issues: [{ path: 'meta.destination' }] });
    const [escaping, missing] = [to('plain', '/../x'), to('nope', '/x')];
    await producer.send(stack.config.topicIn, [
      { key: escaping.meta.requestId, value: JSON.stringify(escaping) },
      { key: missing.meta.requestId, value: JSON.stringify(missing) },
    ]);
    for (const sent of [escaping, missing]) {
      const result = await results.one(sent.meta.requestId);
      expect(result.response.status).toBe(400);
      expect(result.meta.error?.code).toBe('invalid_request');
    }
    expect(target.calls.some((c) => c.path.includes('..') || c.path === '/x')).toBe(false);
  });

  it('a key limited to destinations calls nothing else', async () => {
    const limited = await stackKey(stack, { destinations: ['plain'] });
    const absolute = await post(
      { request: { uri: `${target.url}/abs` }, meta: { requestId: uniqueName('a') } },
      limited,
    );
    expect(absolute.status).toBe(403);
    expect(await absolute.json()).toMatchObject({ code: 'forbidden', issues: [{ path: 'request.uri' }] });
    expect((await post(to('paced', '/x'), limited)).status).toBe(403);
    expect((await post(to('plain', '/limited'), limited)).status).toBe(202);
    expect(target.calls.some((c) => c.path === '/abs')).toBe(false);
  });

  it('the destination’s credential: for keys listing it, only to its origin', async () => {
    const granted = await stackKey(stack, { destinations: ['pay'] });
    const paid = to('pay', '/invoices');
    expect((await post(paid, granted)).status).toBe(202);
    expect((await results.one(paid.meta.requestId)).response.status).toBe(200);
    // A key listing neither the destination nor its credential; a record of in without a client.
    const refused = await post(to('pay', '/invoices'), caller);
    expect(refused.status).toBe(403);
    const anonymous = to('pay', '/invoices');
    await producer.send(stack.config.topicIn, [
      { key: anonymous.meta.requestId, value: JSON.stringify(anonymous) },
    ]);
    expect((await results.one(anonymous.meta.requestId)).meta.error?.code).toBe('forbidden');
    // A destination may not carry the credential elsewhere than its origins.
    const elsewhere = await admin('update', { name: 'pay', spec: { baseUrl: target.url } });
    expect(elsewhere.status).toBe(400);
    expect(await elsewhere.text()).toContain('not bound to');
    // Nor once the credential's origins change under it: the door refuses it, and the executor
    // refuses what comes straight from Kafka (under a Kafka-entry client allowed the credential).
    const entry = await stackKey(stack, { kafkaEntry: true, credentials: ['partner-pay'] });
    const moved = await fetch(`${stack.adminUrl}/admin/api/credentials/set-origins`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operator.headers },
      body: JSON.stringify({ name: 'partner-pay', origins: ['https://elsewhere.example'] }),
    });
    expect(moved.status).toBe(200);
    // The contract: every process reads the change within CREDENTIALS_CACHE_TTL. The ingress and
    // each executor keep a copy of their own, read at different times, so the door refusing says
    // nothing of the executors: only the TTL's passing does.
    await sleep(2 * CACHE_TTL_MS);
    const door = await post(to('pay', '/after'), granted);
    expect(door.status).toBe(403);
    expect(await door.json()).toMatchObject({ code: 'credential_origin_refused' });
    const servedBefore = partner.ok;
    const direct = to('pay', '/direct', { client: entry.name });
    await producer.send(stack.config.topicIn, [
      { key: direct.meta.requestId, value: JSON.stringify(direct) },
    ]);
    expect((await results.one(direct.meta.requestId)).meta.error?.code).toBe('credential_origin_refused');
    expect(partner.ok).toBe(servedBefore);
    expect(target.calls.some((c) => c.headers.authorization !== undefined)).toBe(false);
  });

  it('per-destination metrics on /metrics of the running executors: calls, latency, breaker, pacing, cap, pause', async () => {
    const made = [
      ['m-plain', { baseUrl: target.url }],
      [
        'm-strict',
        {
          baseUrl: target.url,
          breaker: { failureThreshold: 1, openDuration: '1m' },
          pacing: false,
          maxConcurrency: 3,
        },
      ],
    ] as const;
    for (const [name, spec] of made) {
      const created = await admin('create', { name, spec });
      expect(created.status, await created.text()).toBe(200);
    }
    for (const i of [1, 2]) {
      const sent = to('m-plain', `/echo?m=${i}`);
      expect((await post(sent)).status).toBe(202);
      expect((await results.one(sent.meta.requestId)).response.status).toBe(200);
    }
    // Two clients fail once each: the destination's own breaker (threshold 1) opens for every caller.
    const other = await stackKey(stack);
    for (const key of [caller, other]) {
      const sent = to('m-strict', '/status/503?m=strict');
      expect((await post(sent, key)).status).toBe(202);
      expect((await results.one(sent.meta.requestId)).response.status).toBe(503);
    }
    const scrape = async () =>
      (
        await Promise.all(
          [stack.adminUrl, secondAdminUrl].map(async (url) => (await fetch(`${url}/metrics`)).text()),
        )
      ).join('\n');
    // Counters are each executor's own (summed); gauges are the state both sample (the first's).
    const sum = (text: string, name: string, labels: Record<string, string>) =>
      samplesOf(text, name, labels).reduce((total, value) => total + value, 0);
    const gauge = (text: string, name: string, labels: Record<string, string>) =>
      samplesOf(text, name, labels)[0];
    let text = '';
    await eventually(
      async () => {
        text = await scrape();
        return (
          sum(text, 'requester_executor_destination_calls_total', {
            destination: 'm-plain',
            outcome: '2xx',
          }) === 2 &&
          sum(text, 'requester_executor_destination_calls_total', {
            destination: 'm-strict',
            outcome: '5xx',
          }) === 2 &&
          gauge(text, 'requester_destination_breaker_state', { destination: 'm-strict' }) === 2
        );
      },
      30_000,
      'the calls of both destinations counted, the strict one’s breaker open',
    );
    expect(sum(text, 'requester_executor_destination_call_seconds_count', { destination: 'm-plain' })).toBe(
      2,
    );
    expect(gauge(text, 'requester_destination_breaker_state', { destination: 'm-plain' })).toBe(0);
    expect(gauge(text, 'requester_destination_pacing', { destination: 'm-strict' })).toBe(0);
    expect(gauge(text, 'requester_destination_pacing', { destination: 'm-plain' })).toBe(1);
    expect(gauge(text, 'requester_destination_concurrency_limit', { destination: 'm-strict' })).toBe(3);
    expect(gauge(text, 'requester_destination_pace_rate', { destination: 'm-strict' })).toBe(0);
    expect(gauge(text, 'requester_destination_paused', { destination: 'm-plain' })).toBe(0);
    // Bounded labels: the destination, and the outcome class or bucket; never a request's own.
    const lines = text.split('\n').filter((l) => /^requester_(executor_)?destination_/.test(l));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      const names = [...line.slice(line.indexOf('{'), line.lastIndexOf('}')).matchAll(/(\w+)="/g)].map(
        (m) => m[1],
      );
      expect(names, line).toContain('destination');
      for (const name of names) expect(['destination', 'outcome', 'le'], line).toContain(name);
    }

    const pauses = (path: string) =>
      fetch(`${stack.adminUrl}/admin/api/pauses${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...operator.headers },
        body: JSON.stringify({ scope: 'destination', value: 'm-plain' }),
      });
    expect((await pauses('')).status).toBe(200);
    await eventually(
      async () => gauge(await scrape(), 'requester_destination_paused', { destination: 'm-plain' }) === 1,
      30_000,
      'the paused destination’s gauge at 1',
    );
    expect((await pauses('/resume')).status).toBe(200);
  }, 120_000);

  it(`pinned: a caller asking for 1000/s gets the destination's ${LIMIT} per ${WINDOW_MS} ms, by arrival at the target`, async () => {
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: PACED }, async (_, i) => {
        const sent = to('paced', `/paced-${i}`, {
          limiter: { key: 'mine', algorithm: 'token-bucket', rates: [{ duration: '1s', value: 1000 }] },
          retry: { max: 50, delay: '0s' },
        });
        ids.push(sent.meta.requestId);
        expect((await post(sent)).status).toBe(202);
      }),
    );
    await results.until(() => ids.every((id) => results.byId.has(id)), 240_000, `${PACED} results`);
    for (const id of ids) expect(results.byId.get(id)?.[0]?.response.status).toBe(200);
    const seen = (await arrivals.arrivals()).filter((a) => a.path.startsWith('/paced-'));
    expect(seen).toHaveLength(PACED);
    const busiest = busiestWindow(
      seen.map((a) => a.at),
      WINDOW_MS,
    );
    const byExecutor = await callsByExecutor([stack.adminUrl, secondAdminUrl], arrivals.port);
    console.info(
      `busiest ${WINDOW_MS} ms window of arrivals: ${busiest}; calls by executor ${byExecutor.join(', ')}`,
    );
    expect(busiest).toBeLessThanOrEqual(LIMIT);
  }, 300_000);
});

/** The values of `name`'s samples in a Prometheus exposition whose labels include `labels`. */
function samplesOf(text: string, name: string, labels: Record<string, string>): number[] {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`))
    .filter((line) => {
      const set = line.slice(name.length + 1, line.lastIndexOf('}')).split(',');
      return wanted.every((pair) => set.includes(pair));
    })
    .map((line) => Number(line.slice(line.lastIndexOf(' ') + 1)));
}
