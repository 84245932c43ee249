import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SignatureError, verifyRequest, verifySignature, verifyWebhook } from './index.ts';

/** The Standard Webhooks specification's own example (secret, message, signature). */
const SPEC = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

const specHeaders = (signature = SPEC.signature) => ({
  'webhook-id': SPEC.id,
  'webhook-timestamp': String(SPEC.timestamp),
  'webhook-signature': signature,
});

describe('receivers', () => {
  it('verify the Standard Webhooks example of the specification', async () => {
    const verified = await verifyWebhook({
      secrets: SPEC.secret,
      headers: specHeaders(),
      body: SPEC.body,
      now: SPEC.timestamp * 1000,
    });
    expect(verified).toEqual({ id: SPEC.id, timestamp: SPEC.timestamp });
  });

  it('refuse another body, another secret, and a timestamp beyond the tolerance', async () => {
    const now = SPEC.timestamp * 1000;
    const base = { secrets: SPEC.secret, headers: specHeaders(), body: SPEC.body, now };
    await expect(verifyWebhook({ ...base, body: '{"test": 1}' })).rejects.toThrow(SignatureError);
    const other = `whsec_${randomBytes(24).toString('base64')}`;
    await expect(verifyWebhook({ ...base, secrets: other })).rejects.toThrow(SignatureError);
    await expect(verifyWebhook({ ...base, now: now + 301_000 })).rejects.toThrow(/300 s/);
    await expect(verifyWebhook({ ...base, now: now - 301_000 })).rejects.toThrow(/300 s/);
    await expect(
      verifyWebhook({ ...base, now: now + 301_000, toleranceSeconds: 600 }),
    ).resolves.toBeDefined();
    await expect(verifyWebhook({ ...base, headers: {} })).rejects.toThrow(/required/);
  });

  it('accept any one of several signatures and several secrets (a rotation)', async () => {
    const other = `whsec_${randomBytes(24).toString('base64')}`;
    const verified = await verifyWebhook({
      secrets: [other, SPEC.secret],
      headers: specHeaders(`v1,AAAA ${SPEC.signature}`),
      body: new TextEncoder().encode(SPEC.body),
      now: SPEC.timestamp * 1000,
    });
    expect(verified.id).toBe(SPEC.id);
  });

  it('verify X-Signature, hex HMAC-SHA256 of the body, for hex:, base64: and text: secrets', async () => {
    const key = randomBytes(32);
    const body = '{"id":42}';
    const signature = createHmac('sha256', key).update(body).digest('hex');
    for (const secret of [`hex:${key.toString('hex')}`, `base64:${key.toString('base64')}`]) {
      await expect(
        verifySignature({ secrets: secret, headers: { 'X-Signature': signature }, body }),
      ).resolves.toBeUndefined();
    }
    const text = createHmac('sha256', 'a text secret of 16+').update(body).digest('hex');
    await verifySignature({
      secrets: 'text:a text secret of 16+',
      headers: { 'x-signature': `0000,${text}` },
      body,
    });
    await expect(
      verifySignature({ secrets: `hex:${key.toString('hex')}`, headers: { 'x-signature': text }, body }),
    ).rejects.toThrow(SignatureError);
    await expect(
      verifySignature({ secrets: SPEC.secret, headers: { 'x-signature': text }, body }),
    ).rejects.toThrow(/whsec_/);
  });

  it('verify a fetch Request by the scheme its headers carry, and hand back its body', async () => {
    const request = new Request('http://127.0.0.1/hooks', {
      method: 'POST',
      headers: specHeaders(),
      body: SPEC.body,
    });
    // The example is from 2021: a tolerance that reaches it.
    const tolerance = Math.ceil(Date.now() / 1000) - SPEC.timestamp + 60;
    expect(await verifyRequest(request, { secrets: SPEC.secret, toleranceSeconds: tolerance })).toBe(
      SPEC.body,
    );
  });
});
