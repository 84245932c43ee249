import { safeParseRequestEnvelope } from '@requester/shared/contract';
import { describe, expect, it } from 'vitest';
import {
  destination,
  envelope,
  get,
  ordered,
  partition,
  post,
  proxyData,
  requestId,
  scheduledAt,
  signedWith,
  sync,
  wakeUp,
  withCredentials,
  withRequestId,
} from './index.ts';

/** What the builders make is what Requester's own validator accepts, field for field. */
function accepted(value: unknown) {
  const parsed = safeParseRequestEnvelope(value);
  if (!parsed.ok) throw new Error(parsed.error.message);
  return parsed.value;
}

describe('builders', () => {
  it('make envelopes Requester accepts, with a generated requestId unless one is given', () => {
    const a = envelope(get('https://api.partner.example/quotes/apple'));
    const b = envelope(get('https://api.partner.example/quotes/apple'));
    expect(accepted(a).meta.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.meta.requestId).not.toBe(b.meta.requestId);
    expect(envelope('https://x.example', requestId('order-42')).meta.requestId).toBe('order-42');
  });

  it('cover the common cases: sync, ordered, scheduled, signed, with a credential, proxyData', () => {
    const at = new Date('2026-12-01T09:00:00Z');
    const built = accepted(
      envelope(
        post('https://api.partner.example/orders', { id: 42 }),
        sync(),
        ordered('order-42'),
        scheduledAt(at),
        signedWith('partner-hooks'),
        withCredentials('partner-billing'),
        proxyData({ tenant: 't1' }),
        { retry: { max: 5, delay: '200ms' } },
      ),
    );
    expect(built.request).toMatchObject({
      method: 'POST',
      body: '{"id":42}',
      headers: { 'content-type': 'application/json' },
    });
    expect(built.meta).toMatchObject({
      sync: true,
      partition: '!order-42',
      scheduled: '2026-12-01T09:00:00.000Z',
      signing: { keyId: 'partner-hooks' },
      credentials: 'partner-billing',
      proxyData: { tenant: 't1' },
      retry: { max: 5, delay: '200ms' },
    });
    expect(ordered('!already').partition).toBe('!already');
    expect(partition('bulk').partition).toBe('bulk');
    expect(post('https://x.example', 'raw', { 'Content-Type': 'text/plain' }).headers).toEqual({
      'Content-Type': 'text/plain',
    });
  });

  it('make a wake-up: no uri, the payload and proxyData come back at the time asked', () => {
    const built = accepted(wakeUp('2026-12-01T09:00:00Z', { body: 'hello', proxyData: { n: 1 } }));
    expect(built.request).toMatchObject({ uri: '', body: 'hello' });
    expect(built.meta).toMatchObject({ scheduled: '2026-12-01T09:00:00Z', proxyData: { n: 1 } });
  });

  it('name a destination with a relative URI', () => {
    const built = accepted(envelope(get('/v2/invoices?x=1'), destination('partner-billing')));
    expect(built).toMatchObject({
      request: { uri: '/v2/invoices?x=1' },
      meta: { destination: 'partner-billing' },
    });
  });

  it('withRequestId keeps a given id and the rest of the envelope', () => {
    const given = { request: { uri: '' }, meta: { requestId: 'mine', partition: 'p' } };
    expect(withRequestId(given)).toBe(given);
    const filled = withRequestId({ request: { uri: '' }, meta: { partition: 'p' } });
    expect(filled.meta).toMatchObject({ partition: 'p', requestId: expect.any(String) });
  });
});
