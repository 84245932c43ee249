import { connect } from 'node:net';
import {
  type KafkaProducer,
  type KafkaRecord,
  parseAnyDeadLetter,
  type ResultEnvelope,
} from '@requester/shared';
import { startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  Tail,
  waitReady,
} from './stack.fixture.ts';

/**
 * The bad-input corpus: every kind of bad input found by probing, sent by HTTP and by Kafka, with
 * the exact answer each gets — and, for Kafka, proof that the record is confined to itself: the
 * next valid record on the same partition (same key) completes.
 *
 * One row per case. `kafka` is the record put on `in`; its answer is an error result on `out`
 * keyed by the requestId when readable, else by the record's key (`answerKey`), carrying the
 * record's offset, plus a dead letter (reason `unprocessable`). `http` is the same input posted
 * to POST /request (with a valid API key). Cases that are accepted but hostile (a backoff that
 * overflows, a requestId reused for another request) have their own tests below the table.
 */
interface Case {
  name: string;
  kafka?: {
    key: string | Buffer | null;
    value: string | Buffer | null;
    /** The key the answer carries (default: the record's key). */
    answerKey?: string | null;
    requestId?: string;
    code: string;
    status: number;
  };
  http?: { body: string | Buffer; contentType?: string; status: number; code: string };
}

const run = uniqueName('bad');
const valid = (requestId: string, meta: Record<string, unknown> = {}) =>
  JSON.stringify({ request: { uri: '', body: 'ok' }, meta: { requestId, ...meta } });
const hugeKey = Buffer.alloc(200 * 1024, 'k');
/** `text` with `BAD` replaced by FF FE C3 28: no UTF-8 (read leniently, EF BF BD ×3 + 28). */
const notUtf8 = (text: string) => {
  const [before, after] = text.split('BAD') as [string, string];
  return Buffer.concat([Buffer.from(before), Buffer.from([0xff, 0xfe, 0xc3, 0x28]), Buffer.from(after)]);
};
/** proxyData numbers JSON.parse turns into ±Infinity (then null) or a rounded double. */
const inexact = (requestId: string) =>
  valid(requestId).replace(
    '"meta":{',
    '"meta":{"proxyData":{"n":1e999999,"m":-1e400,"big":123456789012345678901234567890},',
  );

const CASES: Case[] = [
  {
    name: 'unreadable JSON',
    kafka: { key: `${run}-json`, value: '{not json', code: 'invalid_request', status: 400 },
    http: { body: '{not json', status: 400, code: 'invalid_request' },
  },
  {
    name: 'valid JSON, invalid envelope with a readable requestId',
    kafka: {
      key: `${run}-env-key`,
      value: JSON.stringify({ request: { uri: 'ftp://x' }, meta: { requestId: `${run}-env` } }),
      answerKey: `${run}-env`,
      requestId: `${run}-env`,
      code: 'invalid_request',
      status: 400,
    },
    http: {
      body: JSON.stringify({ request: { uri: 'ftp://x' }, meta: { requestId: `${run}-env` } }),
      status: 400,
      code: 'invalid_request',
    },
  },
  {
    name: 'valid JSON, invalid envelope without a requestId',
    kafka: {
      key: `${run}-noid`,
      value: JSON.stringify({ request: {} }),
      code: 'invalid_request',
      status: 400,
    },
    http: { body: JSON.stringify({ request: {} }), status: 400, code: 'invalid_request' },
  },
  {
    name: 'a JSON value that is not an object',
    kafka: { key: `${run}-array`, value: '[1,2]', code: 'invalid_request', status: 400 },
    http: { body: '[1,2]', status: 400, code: 'invalid_request' },
  },
  {
    name: 'a huge key (200 KiB): the answer carries its first 1 KiB',
    kafka: {
      key: hugeKey,
      value: '{oops',
      answerKey: hugeKey.subarray(0, 1024).toString(),
      code: 'invalid_request',
      status: 400,
    },
  },
  {
    name: 'a null value (tombstone)',
    kafka: { key: `${run}-tomb`, value: null, code: 'invalid_request', status: 400 },
    http: { body: '', status: 400, code: 'invalid_request' },
  },
  {
    // Refused by the queue today (dueAt < 0), by the contract once it checks: the same answer.
    name: 'meta.scheduled before 1970',
    kafka: {
      key: `${run}-1969`,
      value: valid(`${run}-1969`, { scheduled: '1969-07-20T20:17:00Z' }),
      requestId: `${run}-1969`,
      code: 'invalid_request',
      status: 400,
    },
    http: {
      body: valid(`${run}-year0`, { scheduled: '0000-01-01T00:00:00Z' }),
      status: 400,
      code: 'invalid_request',
    },
  },
  {
    // The executor wants windows of 1 ms or more: refused at the door, not after the queue.
    name: 'a limiter window of 999us',
    kafka: {
      key: `${run}-999us`,
      value: valid(`${run}-999us`, {
        limiter: { key: 'k', algorithm: 'token-bucket', rates: [{ duration: '999us', value: 1 }] },
      }),
      requestId: `${run}-999us`,
      code: 'invalid_request',
      status: 400,
    },
    http: {
      body: valid(`${run}-1ns`, {
        limiter: { key: 'k', algorithm: 'token-bucket', rates: [{ duration: '1ns', value: 1 }] },
      }),
      status: 400,
      code: 'invalid_request',
    },
  },
  {
    name: 'a tryCount of 1000 with retry.max 3 (no attempt left: no call)',
    kafka: {
      key: `${run}-tries`,
      value: JSON.stringify({ ...JSON.parse(valid(`${run}-tries`, { retry: { max: 3 } })), tryCount: 1000 }),
      requestId: `${run}-tries`,
      code: 'invalid_request',
      status: 400,
    },
    http: {
      body: JSON.stringify({ ...JSON.parse(valid(`${run}-tries-h`, { retry: { max: 3 } })), tryCount: 1000 }),
      status: 400,
      code: 'invalid_request',
    },
  },
  {
    name: 'proxyData nested 5,000 levels deep',
    kafka: {
      key: `${run}-deep`,
      value: valid(`${run}-deep`).replace(
        '"meta":{',
        `"meta":{"proxyData":${'['.repeat(5000)}${']'.repeat(5000)},`,
      ),
      requestId: `${run}-deep`,
      code: 'invalid_request',
      status: 400,
    },
    http: {
      body: valid(`${run}-deep-h`).replace(
        '"meta":{',
        `"meta":{"proxyData":${'['.repeat(5000)}${']'.repeat(5000)},`,
      ),
      status: 400,
      code: 'invalid_request',
    },
  },
  {
    // Over HTTP it always was a 400; on Kafka it was called with U+FFFD in place of the bytes.
    name: 'a request.body that is not valid UTF-8',
    kafka: {
      key: `${run}-utf8`,
      value: notUtf8(
        JSON.stringify({ request: { uri: '', body: 'BAD' }, meta: { requestId: `${run}-utf8` } }),
      ),
      answerKey: `${run}-utf8`,
      requestId: `${run}-utf8`,
      code: 'invalid_request',
      status: 400,
    },
    http: {
      body: notUtf8(
        JSON.stringify({ request: { uri: '', body: 'BAD' }, meta: { requestId: `${run}-utf8-h` } }),
      ),
      status: 400,
      code: 'invalid_request',
    },
  },
  {
    // They came back as null, null and 1.2345678901234568e+29: refused, never echoed changed.
    name: 'proxyData with numbers a double does not carry as written',
    kafka: {
      key: `${run}-num`,
      value: inexact(`${run}-num`),
      answerKey: `${run}-num`,
      requestId: `${run}-num`,
      code: 'invalid_request',
      status: 400,
    },
    http: { body: inexact(`${run}-num-h`), status: 400, code: 'invalid_request' },
  },
  {
    // A web page may post text/plain or a form cross-site without a CORS preflight.
    name: 'a body declared text/plain',
    http: {
      body: valid(`${run}-text`),
      contentType: 'text/plain',
      status: 415,
      code: 'unsupported_media_type',
    },
  },
  {
    name: 'a Kafka key the outbox refuses (a NUL byte in PostgreSQL text)',
    kafka: {
      key: `${run}-nul\u0000`,
      value: valid(`${run}-nul`, { scheduled: '2999-01-01T00:00:00Z' }),
      answerKey: `${run}-nul`,
      requestId: `${run}-nul`,
      code: 'invalid_request',
      status: 400,
    },
  },
];

/**
 * Writes `head` on a connection of its own and reads until the server closes it: the answer, and
 * the error that cut the connection if it did not end cleanly (ECONNRESET: the answer may be lost).
 */
function rawExchange(url: string, head: string): Promise<{ answer: string; error?: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
    });
    socket.on('error', (err: NodeJS.ErrnoException) => resolve({ answer, error: err.code ?? err.message }));
    socket.on('close', () => resolve({ answer }));
    socket.write(head);
  });
}

describe('bad input: every case gets its exact answer, and never stops the records after it', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let producer: KafkaProducer;
  let key: Awaited<ReturnType<typeof stackKey>>;
  let target: Target;
  const out = new Tail();
  const dlq = new Tail();

  beforeAll(async () => {
    stack = await stackEnv({ KAFKA_TOPIC_PARTITIONS: '1' });
    running = await startStack(stack);
    await waitReady(stack);
    await Promise.all([out.start(stack.config.topicOut), dlq.start(stack.config.topicDlq)]);
    producer = await kafkaProducer();
    key = await stackKey(stack);
    target = await startTarget();
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    await target?.close();
    await Promise.all([out.stop(), dlq.stop()]);
    await running?.shutdown('test over');
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const resultOf = (message: KafkaRecord) => JSON.parse(String(message.value)) as ResultEnvelope;

  for (const c of CASES.filter((c) => c.kafka)) {
    it(`Kafka: ${c.name}`, async () => {
      const k = c.kafka as NonNullable<Case['kafka']>;
      const next = uniqueName('next');
      // One partition: the valid record after the poison is behind it, as with the same key.
      const [sent] = await producer.send(stack.config.topicIn, [
        { key: k.key, value: k.value },
        { key: k.key, value: valid(next) },
      ]);
      const offset = String(sent?.baseOffset);
      const answerOf = () => out.messages.find((m) => resultOf(m).meta.error?.source?.offset === offset);
      await expect.poll(answerOf, { timeout: 30_000 }).toBeDefined();
      const answer = answerOf() as KafkaRecord;
      const expectedKey = k.answerKey === undefined ? k.key?.toString() : k.answerKey;
      expect(answer.key?.toString() ?? null).toBe(expectedKey ?? null);
      const result = resultOf(answer);
      expect(result.response.status).toBe(k.status);
      expect(result.meta.requestId).toBe(k.requestId);
      expect(result.meta.error).toMatchObject({
        code: k.code,
        source: { topic: stack.config.topicIn, partition: 0, offset },
      });

      const letterOf = () => dlq.messages.find((m) => parseAnyDeadLetter(m.value).source?.offset === offset);
      await expect.poll(letterOf, { timeout: 30_000 }).toBeDefined();
      const letter = letterOf() as KafkaRecord;
      expect(letter.key?.toString() ?? null).toBe(expectedKey ?? null);
      expect(parseAnyDeadLetter(letter.value)).toMatchObject({
        reason: 'unprocessable',
        result: { meta: result.meta },
      });

      // The next valid record on the same partition completes.
      const nextOf = () => out.messages.find((m) => m.key?.toString() === next);
      await expect.poll(nextOf, { timeout: 30_000 }).toBeDefined();
      expect(resultOf(nextOf() as KafkaRecord).response).toMatchObject({ status: 200, body: 'ok' });
    });
  }

  for (const c of CASES.filter((c) => c.http)) {
    it(`HTTP: ${c.name}`, async () => {
      const h = c.http as NonNullable<Case['http']>;
      const reply = await fetch(`${stack.httpUrl}/request`, {
        method: 'POST',
        headers: { ...key.headers, 'content-type': h.contentType ?? 'application/json' },
        body: h.body,
      });
      expect(reply.status).toBe(h.status);
      expect(await reply.json()).toMatchObject({ status: h.status, code: h.code });
    });
  }

  const postRequest = (body: unknown) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...key.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('a backoff that overflows (multiplier 1e308, delay 0s) still makes exactly retry.max calls, then one result and a dead letter', async () => {
    const requestId = uniqueName('overflow');
    const retry = { max: 4, delay: '0s', multiplier: 1e308, jitter: 0 };
    const uri = `${target.url}/status/500?id=${requestId}`;
    const accepted = await postRequest({ request: { uri }, meta: { requestId, retry } });
    expect(accepted.status).toBe(202);
    const answerOf = () => out.messages.find((m) => m.key?.toString() === requestId);
    await expect.poll(answerOf, { timeout: 30_000 }).toBeDefined();
    const result = resultOf(answerOf() as KafkaRecord);
    expect(result.response.status).toBe(500);
    expect(result.meta.tryCount).toBe(4);
    expect(target.calls.filter((call) => call.path.includes(requestId))).toHaveLength(4);
    const letterOf = () => dlq.messages.find((m) => m.key?.toString() === requestId);
    await expect.poll(letterOf, { timeout: 30_000 }).toBeDefined();
    expect(parseAnyDeadLetter((letterOf() as KafkaRecord).value)).toMatchObject({
      reason: 'retries_exhausted',
    });
    expect(out.messages.filter((m) => m.key?.toString() === requestId)).toHaveLength(1);
  });

  it('a requestId reused for a different request is a 409; the identical retry stays a 202', async () => {
    const requestId = uniqueName('reused');
    const first = { request: { uri: '', body: 'first' }, meta: { requestId } };
    expect((await postRequest(first)).status).toBe(202);
    const other = await postRequest({ request: { uri: '', body: 'second' }, meta: { requestId } });
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ status: 409, code: 'request_id_conflict' });
    expect((await postRequest(first)).status).toBe(202);
    const answers = () => out.messages.filter((m) => m.key?.toString() === requestId);
    await expect.poll(() => answers().length, { timeout: 30_000 }).toBe(1);
    expect(resultOf(answers()[0] as KafkaRecord).response.body).toBe('first');
  });

  it('8,000 headers, or one of 100 KB, get a 431 the client reads whole, on both ports: no reset', async () => {
    const many = Array.from({ length: 8_000 }, (_, i) => `X-Header-${i}: v\r\n`).join('');
    const heads = {
      '8,000 headers': `POST /request HTTP/1.1\r\nHost: x\r\n${many}\r\n`,
      'one 100 KB header': `GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(100_000)}\r\n\r\n`,
    };
    for (const url of [stack.httpUrl, stack.adminUrl]) {
      for (const [name, head] of Object.entries(heads)) {
        const { answer, error } = await rawExchange(url, head);
        expect({ error, status: answer.split('\r\n')[0] }, `${name} on ${url}`).toEqual({
          error: undefined,
          status: 'HTTP/1.1 431 Request Header Fields Too Large',
        });
        expect(answer).toMatch(/\r\n\r\nrequest header fields too large\n$/);
      }
    }
    expect((await fetch(`${stack.adminUrl}/readyz`)).status).toBe(200);
  });

  it('no consumer restarted on any of it: /readyz stays ready', async () => {
    const ready = await fetch(`${stack.adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ready: true, checks: { consumers: true } });
    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    expect(metrics).not.toMatch(
      new RegExp(`kafka_consumer_crashes_total\\{group="${stack.name}[^"]*"\\} [1-9]`),
    );
  });
});
