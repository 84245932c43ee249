import { buildResult, parseRequestEnvelope } from '@requester/shared/contract';
import { describe, expect, it } from 'vitest';
import { ownedBy, resultMessage } from './index.ts';

describe('resultMessage', () => {
  const result = buildResult({
    requestId: 'r-1',
    status: 201,
    body: '"'.repeat(10_000),
    headers: { 'x-a': 'b' },
    tryCount: 2,
    timeNs: 5_000_000,
    waitTimeNs: 7_000,
    proxyData: { back: true },
  });

  it('keys the record by requestId and carries the whole envelope', () => {
    const message = resultMessage(result, 1_000_000);
    expect(message.key).toBe('r-1');
    expect(JSON.parse(String(message.value))).toEqual(result);
  });

  it('answers a result over the limit as 502 payload_too_large, keeping progress and proxyData', () => {
    // 10,000 quotes are 20,000 bytes once escaped.
    const message = resultMessage(result, 15_000);
    const tooLarge = JSON.parse(String(message.value));
    expect(message.key).toBe('r-1');
    expect(tooLarge.response).toEqual({ status: 502, body: '', headers: {} });
    expect(tooLarge.meta).toMatchObject({
      requestId: 'r-1',
      tryCount: 2,
      time: 5_000_000,
      waitTime: 7_000,
      proxyData: { back: true },
      error: { code: 'payload_too_large' },
    });
    expect(tooLarge.meta.error.message).toMatch(
      /target status 201\) is 20\d{3} bytes, more than KAFKA_MAX_MESSAGE_BYTES \(15000\)/,
    );
  });
});

describe('ownedBy', () => {
  const envelope = (client?: string) =>
    parseRequestEnvelope({ request: { uri: '' }, meta: { requestId: 'r-2', ...(client ? { client } : {}) } });
  const result = buildResult({ requestId: 'r-2', status: 200, body: 'x'.repeat(100), tryCount: 1 });

  it("stamps the request's client on its result, which keeps it when answered as too large", () => {
    const owned = ownedBy(envelope('billing'), result);
    expect(owned.meta.client).toBe('billing');
    expect(JSON.parse(String(resultMessage(owned, 1_050).value)).meta).toMatchObject({
      client: 'billing',
      error: { code: 'payload_too_large' },
    });
    expect(ownedBy(envelope(), result)).toBe(result);
  });
});
