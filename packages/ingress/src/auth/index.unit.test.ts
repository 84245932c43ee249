import { parseRequestEnvelope } from '@requester/shared/contract';
import { describe, expect, it } from 'vitest';
import { checkHostPattern } from '../keys/index.ts';
import { hostPortMatches, openAccess } from './index.ts';

describe('--hosts patterns with ports', () => {
  it('a pattern with a port matches that port only (default ports spelled out); without one, any port', () => {
    expect(checkHostPattern(' API.X.example:08443 ')).toBe('api.x.example:8443');
    expect(checkHostPattern('[::1]:8080')).toBe('[::1]:8080');
    for (const bad of ['x.example:', 'x.example:0', 'x.example:65536', 'x.example:http', 'x.example:1:2'])
      expect(() => checkHostPattern(bad), bad).toThrow(/optional :port/);
    expect(hostPortMatches('127.0.0.1', '127.0.0.1', '18601')).toBe(true);
    expect(hostPortMatches('127.0.0.1:8081', '127.0.0.1', '8081')).toBe(true);
    expect(hostPortMatches('127.0.0.1:8081', '127.0.0.1', '18601')).toBe(false);
    expect(hostPortMatches('*.x.example:443', 'a.x.example', '443')).toBe(true);
    expect(hostPortMatches('*.x.example:443', 'a.x.example', '80')).toBe(false);
    expect(hostPortMatches('*.x.example:443', 'x.example', '443')).toBe(false);
    expect(hostPortMatches('[::1]:8080', '[::1]', '8080')).toBe(true);
    expect(hostPortMatches('[::1]', '[::1]', '9999')).toBe(true);
  });
});

describe('AUTH=off and credentials', () => {
  const envelope = (meta: object) =>
    parseRequestEnvelope({ request: { uri: 'https://api.x.example/' }, meta: { requestId: 'r-1', ...meta } });

  it('lets only the credentials of KAFKA_ANONYMOUS_CREDENTIALS in: its records reach the router unsigned', async () => {
    const access = openAccess(new Set(['public-hooks']));
    expect((await access.admit(undefined, envelope({ credentials: 'public-hooks' }))).ok).toBe(true);
    const refused = await access.admit(undefined, envelope({ credentials: 'partner-pay' }));
    expect(refused).toMatchObject({
      ok: false,
      refusal: { status: 403, code: 'forbidden', issues: [{ path: 'meta.credentials' }] },
    });
    const signing = await access.admit(undefined, envelope({ signing: { keyId: 'partner-sign' } }));
    expect(signing).toMatchObject({ ok: false, refusal: { issues: [{ path: 'meta.signing.keyId' }] } });
    expect((await access.admit(undefined, envelope({}))).ok).toBe(true);
  });
});
