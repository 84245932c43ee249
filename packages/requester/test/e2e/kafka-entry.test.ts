import {
  type KafkaProducer,
  type KafkaRecord,
  parseAnyDeadLetter,
  type ResultEnvelope,
} from '@requester/shared';
import { startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  Tail,
  waitReady,
} from './stack.fixture.ts';

/**
 * Kafka entry (issue 19, finding 7; docs/architecture.md §10): whoever can write to `in` could put
 * `meta.client: "<another key>"` on a record and make its result and journal readable by that
 * key. A record written straight to `in` may claim only a client an operator allowed for Kafka
 * entry, or none; Requester's own writers (ingress, relay, DLQ replay) sign theirs and keep their
 * clients.
 */
describe('Kafka entry: who may claim a meta.client on in', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let producer: KafkaProducer;
  let target: Target;
  let results: ResultCollector;
  const dlq = new Tail();
  let b: Awaited<ReturnType<typeof stackKey>>;
  let entry: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    stack = await stackEnv({ KAFKA_TOPIC_PARTITIONS: '1' });
    running = await startStack(stack);
    await waitReady(stack);
    results = new ResultCollector(stack.config.topicOut);
    await Promise.all([results.start(), dlq.start(stack.config.topicDlq)]);
    producer = await kafkaProducer();
    target = await startTarget();
    b = await stackKey(stack);
    entry = await stackKey(stack, { kafkaEntry: true });
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    await target?.close();
    await Promise.all([results?.stop(), dlq.stop()]);
    await running?.shutdown('test over');
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const wakeUp = (requestId: string, meta: Record<string, unknown> = {}) =>
    JSON.stringify({ request: { uri: '', body: 'ok' }, meta: { requestId, ...meta } });
  /** A long-poll of `id` with `key`: its status and body. */
  const poll = async (key: { headers: Record<string, string> }, id: string) => {
    const reply = await fetch(`${stack.httpUrl}/requests/${encodeURIComponent(id)}?wait=2s`, {
      headers: key.headers,
    });
    return { status: reply.status, body: (await reply.json()) as ResultEnvelope };
  };
  const letterOf = (offset: string) =>
    dlq.messages.find((m: KafkaRecord) => parseAnyDeadLetter(m.value).source?.offset === offset);

  it("a record written straight to in claiming another key's client is answered forbidden, dead-lettered without an envelope, and not that key's to read", async () => {
    const forged = uniqueName('forged');
    const badSignature = uniqueName('bad-signature');
    const next = uniqueName('after');
    const [sent] = await producer.send(stack.config.topicIn, [
      { key: forged, value: wakeUp(forged, { client: b.name }) },
      {
        key: forged,
        value: wakeUp(badSignature, { client: b.name }),
        headers: { 'requester-entry': `v1.${Buffer.alloc(32).toString('base64url')}` },
      },
      { key: forged, value: wakeUp(next) },
    ]);
    for (const [i, id] of [forged, badSignature].entries()) {
      const result = await results.one(id);
      expect(result.response.status).toBe(403);
      expect(result.meta.client).toBeUndefined();
      expect(result.meta.error).toMatchObject({
        code: 'forbidden',
        message: expect.stringContaining('Kafka entry'),
        source: { topic: stack.config.topicIn, offset: String(Number(sent?.baseOffset) + i) },
      });
      const offset = String(Number(sent?.baseOffset) + i);
      await expect.poll(() => letterOf(offset), { timeout: 30_000 }).toBeDefined();
      const letter = parseAnyDeadLetter(letterOf(offset)?.value ?? null);
      // No envelope: a DLQ replay (which signs what it writes) cannot make the claim a trusted one.
      expect(letter).toMatchObject({ reason: 'unprocessable', record: expect.any(Object) });
      expect(letter.envelope).toBeUndefined();
      expect((await poll(b, id)).status).toBe(404);
    }
    // Confined to itself: the record behind it on the same partition completes.
    expect((await results.one(next)).response).toMatchObject({ status: 200, body: 'ok' });
  });

  it('a key allowed for Kafka entry may be claimed there, and a record without a client stays in the default namespace', async () => {
    const claimed = uniqueName('claimed');
    const anonymous = uniqueName('anonymous');
    await producer.send(stack.config.topicIn, [
      { key: claimed, value: wakeUp(claimed, { client: entry.name }) },
      { key: anonymous, value: wakeUp(anonymous) },
    ]);
    const result = await results.one(claimed);
    expect(result.response.status).toBe(200);
    expect(result.meta.client).toBe(entry.name);
    const read = await poll(entry, claimed);
    expect(read.status).toBe(200);
    expect(read.body.meta.client).toBe(entry.name);

    const plain = await results.one(anonymous);
    expect(plain.response.status).toBe(200);
    expect(plain.meta.client).toBeUndefined();
  });

  it("Requester's own writers keep their clients: the ingress, the relay (scheduled and retried through the outbox) and a DLQ replay", async () => {
    const post = (body: unknown) =>
      fetch(`${stack.httpUrl}/request`, {
        method: 'POST',
        headers: { ...b.headers, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    // Beyond REDIS_HORIZON (1 s): through the outbox, put back on in by the relay.
    const scheduled = uniqueName('scheduled');
    const at = new Date(Date.now() + 3_000).toISOString();
    expect((await post({ request: { uri: '' }, meta: { requestId: scheduled, scheduled: at } })).status).toBe(
      202,
    );
    // A retry pause of 2 s (±20 %) waits in the outbox too; the second attempt fails for good.
    const retried = uniqueName('retried');
    const uri = `${target.url}/status/500?id=${retried}`;
    const retry = { max: 2, delay: '2s', maxDelay: '2s' };
    expect((await post({ request: { uri }, meta: { requestId: retried, retry } })).status).toBe(202);

    const wokeUp = await results.one(scheduled);
    expect(wokeUp.response.status).toBe(200);
    expect(wokeUp.meta.client).toBe(b.name);
    expect((await poll(b, scheduled)).status).toBe(200);

    const failed = await results.one(retried);
    expect(failed.response.status).toBe(500);
    expect(failed.meta).toMatchObject({ client: b.name, tryCount: 2 });
    await expect
      .poll(() => dlq.messages.some((m) => m.key?.toString() === retried), { timeout: 30_000 })
      .toBe(true);

    const replay = await requester(['dlq', 'replay', '--request-id', retried], stack.env).exit;
    expect(replay.code, replay.stderr).toBe(0);
    await results.until(() => (results.byId.get(retried)?.length ?? 0) >= 2, 30_000, 'the replay');
    // A fresh budget of 2 attempts, the second one through the outbox again.
    const replayed = results.byId.get(retried)?.[1] as ResultEnvelope;
    expect(replayed.response.status).toBe(500);
    expect(replayed.meta).toMatchObject({ client: b.name, tryCount: 4 });
    expect(target.calls.filter((call) => call.path.includes(retried))).toHaveLength(4);
  }, 60_000);
});

describe('Kafka entry during an upgrade (KAFKA_ENTRY=report)', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let results: ResultCollector;
  let producer: KafkaProducer;
  let b: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    stack = await stackEnv({ KAFKA_TOPIC_PARTITIONS: '1', KAFKA_ENTRY: 'report' });
    running = await startStack(stack);
    await waitReady(stack);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    producer = await kafkaProducer();
    b = await stackKey(stack);
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    await results?.stop();
    await running?.shutdown('test over');
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('an unsigned record claiming a client (as an older ingress wrote it) is let through, logged and counted', async () => {
    const id = uniqueName('pre-upgrade');
    const before = await reportedClaims(stack);
    await producer.send(stack.config.topicIn, [
      {
        key: id,
        value: JSON.stringify({ request: { uri: '', body: 'ok' }, meta: { requestId: id, client: b.name } }),
      },
    ]);
    const result = await results.one(id);
    expect(result.response).toMatchObject({ status: 200, body: 'ok' });
    expect(result.meta.client).toBe(b.name);
    expect(await reportedClaims(stack)).toBe(before + 1);
  });

  it('an unsigned record naming a credential outside any scope is let through, logged and counted', async () => {
    const id = uniqueName('pre-upgrade-credential');
    const before = await reportedClaims(stack, 'requester_router_refused_credentials_total');
    // A wake-up: it names the credential (the router judges the name) but calls nobody with it.
    const value = { request: { uri: '', body: 'ok' }, meta: { requestId: id, credentials: 'partner-pay' } };
    await producer.send(stack.config.topicIn, [{ key: id, value: JSON.stringify(value) }]);
    expect((await results.one(id)).response).toMatchObject({ status: 200, body: 'ok' });
    expect(await reportedClaims(stack, 'requester_router_refused_credentials_total')).toBe(before + 1);
  });
});

/** requester_router_refused_claims_total{action="reported"} (or `metric`'s) on the stack's /metrics. */
async function reportedClaims(
  stack: StackEnv,
  metric = 'requester_router_refused_claims_total',
): Promise<number> {
  const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${metric}{action="reported"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}
