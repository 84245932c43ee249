import { safeParseRequestEnvelope } from '@requester/shared/contract';
import { describe, expect, it } from 'vitest';
import { envelope, ordered, requestId, sync } from '../builders/index.ts';
import { toRecord } from './index.ts';

describe('toRecord', () => {
  it('keys an ordered request by its partition, so that it stays on one Kafka partition', () => {
    const record = toRecord(envelope('https://x.example', ordered('order-42'), requestId('r-1')));
    expect(record.key).toBe('!order-42');
  });

  it('keys any other request by its requestId, generated when missing', () => {
    expect(toRecord(envelope('https://x.example', requestId('r-2'))).key).toBe('r-2');
    const generated = toRecord({ request: { uri: '' } });
    expect(generated.key).toBe(
      (JSON.parse(generated.value) as { meta: { requestId: string } }).meta.requestId,
    );
  });

  it('writes a value Requester accepts, without the HTTP-only `sync`', () => {
    const record = toRecord(envelope('https://x.example', sync(), requestId('r-3')));
    const parsed = safeParseRequestEnvelope(JSON.parse(record.value));
    expect(parsed.ok && parsed.value.meta).toEqual({ requestId: 'r-3' });
  });

  it('carries a traceparent header: the one given, else meta.traceparent, else a new trace', () => {
    const given = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect(toRecord({ request: { uri: '' } }, { traceparent: given }).headers.traceparent).toBe(given);
    expect(toRecord({ request: { uri: '' }, meta: { traceparent: given } }).headers.traceparent).toBe(given);
    const fresh = toRecord({ request: { uri: '' } }, { headers: { source: 'billing' } }).headers;
    expect(fresh.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(fresh.source).toBe('billing');
  });
});
