import { describe, expect, it } from 'vitest';
import {
  DEAD_LETTER_HEADERS,
  DEAD_LETTER_REASONS,
  deadLetterMessage,
  parseDeadLetter,
} from './dead-letter.ts';
import { parseRequestEnvelope } from './request.ts';
import { buildResult } from './result.ts';

const envelope = parseRequestEnvelope({
  request: { uri: 'https://api.partner.example/orders', method: 'POST', body: '{"id":42}' },
  meta: {
    requestId: 'ord-42',
    partition: '!order-42',
    traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    retry: { max: 3 },
    proxyData: { tenant: 't1' },
  },
  tryCount: 1,
  createdAt: '2026-11-30T06:00:00Z',
});
const source = { topic: 'requester.in', partition: 2, offset: '41' };
const failedAt = Date.parse('2026-11-30T06:01:00Z');

function result(body: string) {
  return buildResult({ requestId: 'ord-42', status: 503, body, tryCount: 3, proxyData: { tenant: 't1' } });
}

describe('dead-letter message', () => {
  it('round-trips through the parser: key requestId, the envelope and result unchanged', () => {
    const message = deadLetterMessage({
      envelope,
      result: result('down'),
      reason: DEAD_LETTER_REASONS.retriesExhausted,
      source,
      failedAt,
    });
    expect(message.key).toBe('ord-42');
    const record = parseDeadLetter(message.value);
    expect(record).toEqual({
      envelope,
      result: result('down'),
      reason: 'retries_exhausted',
      failedAt: '2026-11-30T06:01:00.000Z',
      source,
    });
  });

  it('names the reason, source, time and status in headers, and carries the trace', () => {
    const message = deadLetterMessage({
      envelope,
      result: result(''),
      reason: 'permanent',
      source,
      failedAt,
    });
    expect(message.headers).toEqual({
      [DEAD_LETTER_HEADERS.reason]: 'permanent',
      [DEAD_LETTER_HEADERS.source]: 'requester.in/2/41',
      [DEAD_LETTER_HEADERS.failedAt]: '2026-11-30T06:01:00.000Z',
      [DEAD_LETTER_HEADERS.status]: '503',
      traceparent: envelope.meta.traceparent,
    });
  });

  it('cuts a large result body on a character boundary and records its full size', () => {
    const body = `${'a'.repeat(9)}é${'b'.repeat(10)}`; // é is 2 bytes, straddling byte 10
    const record = parseDeadLetter(
      deadLetterMessage({ envelope, result: result(body), reason: 'permanent', source, failedAt }, 10).value,
    );
    expect(record.result.response.body).toBe('a'.repeat(9));
    expect(record.resultBodyBytes).toBe(21);
  });

  it('refuses a reason that is not a snake_case code', () => {
    expect(() => deadLetterMessage({ envelope, result: result(''), reason: 'Gave up!', source })).toThrow(
      /snake_case/,
    );
  });
});
