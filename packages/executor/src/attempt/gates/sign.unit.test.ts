import { randomBytes } from 'node:crypto';
import { RequesterError } from '@requester/shared/errors';
import { describe, expect, it } from 'vitest';
import { parseSigningKeys } from '../../signing/index.ts';
import { request, walkThrough } from '../walk.fixture.ts';
import { sign } from './sign.ts';

const signingKeys = parseSigningKeys(`partner=whsec_${randomBytes(24).toString('base64')}`);

describe('the sign gate', () => {
  it('builds the call of an unsigned request and passes it on', async () => {
    const walk = walkThrough(sign, { signingKeys });
    const { attempt } = await walk.run(request());
    expect(walk.reached).toHaveLength(1);
    expect(attempt.call?.uri).toBe('http://127.0.0.1:9/hook');
    expect(attempt.call?.headers['webhook-signature']).toBeUndefined();
  });

  it('signs the call when the request names a key', async () => {
    const walk = walkThrough(sign, { signingKeys });
    const { attempt } = await walk.run(request({ signing: { keyId: 'partner' } }));
    expect(attempt.call?.headers['webhook-signature']).toMatch(/^v1,/);
    expect(attempt.call?.headers['webhook-id']).toBeDefined();
  });

  it('fails an unknown key id before any gate after it runs', async () => {
    const walk = walkThrough(sign, { signingKeys });
    const failed = walk.run(request({ signing: { keyId: 'nobody' } }));
    await expect(failed).rejects.toBeInstanceOf(RequesterError);
    await expect(failed).rejects.toMatchObject({ code: 'invalid_request' });
    expect(walk.reached).toHaveLength(0);
  });
});
