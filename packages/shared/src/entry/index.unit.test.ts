import { createHmac, randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ENTRY_HEADER, EntrySigner } from './index.ts';

describe('EntrySigner', () => {
  const secret = randomBytes(32);
  const signer = new EntrySigner(secret);
  const value = JSON.stringify({ request: { uri: '' }, meta: { requestId: 'r-1', client: 'billing' } });

  it('signs as `v1.` + base64url(HMAC-SHA256(secret, "requester-entry/v1\\n" + value))', () => {
    const mac = createHmac('sha256', secret).update(`requester-entry/v1\n${value}`).digest('base64url');
    expect(signer.sign(value)).toBe(`v1.${mac}`);
    expect(signer.sign(Buffer.from(value))).toBe(`v1.${mac}`);
  });

  it('verifies what it signed, as bytes read back from Kafka', () => {
    const headers = signer.signed(value, { 'requester-channel': 'http' });
    expect(headers['requester-channel']).toBe('http');
    expect(signer.verify(Buffer.from(value), headers)).toBe(true);
    // A header read back is bytes; a repeated one is a list (the first counts).
    expect(signer.verify(Buffer.from(value), { [ENTRY_HEADER]: [Buffer.from(signer.sign(value))] })).toBe(
      true,
    );
  });

  it('refuses a changed value, another secret, a missing, malformed or other-version signature', () => {
    const header = { [ENTRY_HEADER]: signer.sign(value) };
    expect(signer.verify(Buffer.from(value.replace('billing', 'probe-b')), header)).toBe(false);
    expect(new EntrySigner(randomBytes(32)).verify(Buffer.from(value), header)).toBe(false);
    expect(signer.verify(Buffer.from(value), {})).toBe(false);
    expect(signer.verify(null, header)).toBe(false);
    for (const bad of [
      '',
      'v1.',
      'v1.AAAA',
      `v2.${signer.sign(value).slice(3)}`,
      signer.sign(value).slice(0, -2),
    ])
      expect(signer.verify(Buffer.from(value), { [ENTRY_HEADER]: bad }), bad).toBe(false);
  });

  it('never shows its secret', () => {
    expect(JSON.stringify({ signer })).toBe('{"signer":"[redacted]"}');
    expect(inspect(signer)).toBe('EntrySigner [redacted]');
    expect(() => new EntrySigner(Buffer.alloc(8))).toThrow(RangeError);
  });
});
