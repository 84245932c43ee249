import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Standard Webhooks verification written from the spec (https://www.standardwebhooks.com), the way
 * a receiver does it, independently of the signer: the signed content is `${id}.${timestamp}.${body}`,
 * the key the base64-decoded part of `whsec_…`, the header a space-separated list of `v1,<base64>`;
 * timestamps outside a 5-minute tolerance are refused.
 */
export function verifyStandardWebhook(
  secret: string,
  headers: Record<string, string>,
  body: string,
  nowSeconds: number,
): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (!id || !timestamp || !signatures) return false;
  if (!/^\d+$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > 5 * 60) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`, 'utf8').digest();
  return signatures.split(' ').some((entry) => {
    const [version, signature] = entry.split(',');
    if (version !== 'v1' || !signature) return false;
    const given = Buffer.from(signature, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/** A receiver of the plain scheme: hex HMAC-SHA256 of the body, any of a comma-separated list. */
export function verifyPlain(key: Buffer, headers: Record<string, string>, body: string): boolean {
  const expected = createHmac('sha256', key).update(body, 'utf8').digest('hex');
  return (headers['x-signature'] ?? '').split(',').some((value) => value.trim() === expected);
}
