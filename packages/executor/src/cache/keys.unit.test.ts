import { describe, expect, it } from 'vitest';
import { requestIdentity } from './keys.ts';

describe('requestIdentity and credentials', () => {
  it('tells apart one request made with two credentials, and keeps the identity of one made with none', () => {
    const request = { method: 'GET', uri: 'https://partner.example/balance' };
    const none = requestIdentity(request);
    expect(requestIdentity({ ...request, credentials: undefined })).toBe(none);
    const a = requestIdentity({ ...request, credentials: 'partner-a' });
    const b = requestIdentity({ ...request, credentials: 'partner-b' });
    expect(new Set([none, a, b]).size).toBe(3);
  });
});
