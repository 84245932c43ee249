import { randomBytes } from 'node:crypto';
import { CredentialStore, parseMasterKeys, parseSigningKeys } from '@requester/shared/credentials';
import { ValidationError } from '@requester/shared/errors';
import { createPg } from '@requester/shared/pg';
import { eventually, testPg } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CredentialResolver } from '../credentials/resolve.ts';
import type { HttpCall } from '../http/index.ts';
import { SigningKeyring, signRequest } from './index.ts';
import { verifyPlain, verifyStandardWebhook } from './verify.fixture.ts';

const MASTER = parseMasterKeys(`m1:${randomBytes(32).toString('base64')}`);
const whsec = () => `whsec_${randomBytes(24).toString('base64')}`;
const call: HttpCall = { method: 'POST', uri: 'https://partner.example/hook', headers: {}, body: '{"n":1}' };
const ORIGIN = 'https://partner.example';

/** Signing keys from the credential store (real PostgreSQL), beside the deprecated SIGNING_KEYS. */
describe('signing keys in the credential store', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  let store: CredentialStore;
  let keyring: SigningKeyring;
  const legacySecret = 'text:legacy-signing-secret-0123456789';

  beforeAll(async () => {
    pg = await testPg();
    store = new CredentialStore(pg.sql, MASTER);
    keyring = new SigningKeyring({
      resolver: new CredentialResolver(store, 100),
      legacy: parseSigningKeys(`old-hooks=${legacySecret};hooks=text:shadowed-by-the-store-0123`),
    });
  });
  afterAll(async () => {
    await pg?.drop();
  });

  const sign = async (keyId: string) =>
    signRequest(call, { keyId, requestId: 'r-1' }, await keyring.keys(keyId, call)).headers;
  const now = () => Math.floor(Date.now() / 1000);

  it('signs with a stored key; a rotation keeps the old secret signing beside the new; a revocation wins over SIGNING_KEYS', async () => {
    const [first, second] = [whsec(), whsec()];
    const created = await store.create('hooks', { signing: first }, ORIGIN);
    expect(created.summary).toEqual({ signing: { scheme: 'standard-webhooks', secrets: 1 } });
    const headers = await sign('hooks');
    expect(verifyStandardWebhook(first, headers, call.body as string, now())).toBe(true);
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(1);

    const rotated = await store.rotate('hooks', { signing: [second, first] });
    expect(rotated?.summary).toEqual({ signing: { scheme: 'standard-webhooks', secrets: 2 } });
    // The executor trusts what it read for the cache TTL (100 ms): poll, not sleep.
    await eventually(
      async () => (await sign('hooks'))['webhook-signature']?.split(' ').length === 2,
      10_000,
      'the rotation is seen',
    );
    const both = await sign('hooks');
    expect(verifyStandardWebhook(second, both, call.body as string, now())).toBe(true);
    expect(verifyStandardWebhook(first, both, call.body as string, now())).toBe(true);

    await store.revoke('hooks');
    await eventually(
      async () => (await keyring.keys('hooks').catch((err) => err)).code === 'credential_revoked',
      10_000,
      'the revocation is seen',
    );
    const refused = await keyring.keys('hooks').catch((err) => err);
    expect(refused.message).toBe('signing key credential hooks is revoked');
  });

  it('falls back to SIGNING_KEYS for ids the store does not know; refuses unknown ids and credentials without signing', async () => {
    const plain = await sign('old-hooks');
    expect(verifyPlain(Buffer.from(legacySecret.slice(5)), plain, call.body as string)).toBe(true);
    await expect(keyring.keys('nobody')).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'unknown signing key id "nobody"',
    });
    await store.create('only-proxy', { proxy: 'http://127.0.0.1:3128' }, ORIGIN);
    await expect(keyring.keys('only-proxy')).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'credential only-proxy holds no signing secret (meta.signing.keyId)',
    });
  });

  it('validates signing secrets without echoing them; one scheme per credential', async () => {
    const short = 'hex:00112233';
    const caught = await store.create('bad', { signing: [whsec(), short] }, ORIGIN).catch((err) => err);
    expect(caught).toBeInstanceOf(ValidationError);
    expect(caught.message).toContain('signing.1');
    expect(caught.message).toContain('the secret has 4 bytes; at least 16 are needed');
    expect(caught.message).not.toContain('00112233');
    const mixed = await store
      .create('mixed', { signing: [whsec(), 'text:another-scheme-secret-0123'] }, ORIGIN)
      .catch((err) => err);
    expect(mixed.message).toContain('one scheme');
    await expect(store.create('none', { signing: [] }, ORIGIN)).rejects.toBeInstanceOf(ValidationError);
  });

  it('signs only for the credential’s origins: no signing oracle for other hosts, ports or Host headers', async () => {
    const secret = whsec();
    await store.create('receiver-hooks', { signing: secret }, ORIGIN);
    const elsewhere = [
      { ...call, uri: 'https://attacker.example/hook' },
      { ...call, uri: 'https://partner.example:8443/hook' },
      { ...call, uri: 'http://partner.example/hook' },
      { ...call, headers: { Host: 'attacker.example' } },
    ];
    for (const target of elsewhere)
      await expect(keyring.keys('receiver-hooks', target)).rejects.toMatchObject({
        code: 'credential_origin_refused',
      });
    const signed = await sign('receiver-hooks');
    expect(verifyStandardWebhook(secret, signed, call.body as string, now())).toBe(true);
    // Imported from SIGNING_KEYS (no origins known): refused until an operator names them.
    await store.create('imported', { signing: whsec() }, null);
    await expect(keyring.keys('imported', call)).rejects.toMatchObject({
      code: 'credential_origin_refused',
      message: expect.stringContaining('set-origins imported'),
    });
  });

  it('a store that does not answer makes the task come back (dependency_unavailable), not fail', async () => {
    const dead = createPg({ url: 'postgres://postgres@127.0.0.1:1/none', max: 1 });
    const broken = new SigningKeyring({
      resolver: new CredentialResolver(new CredentialStore(dead, MASTER), 100),
    });
    await expect(broken.keys('hooks')).rejects.toMatchObject({ code: 'dependency_unavailable' });
    await dead.end({ timeout: 1 });
  });

  it('with neither a store nor SIGNING_KEYS, a key id is a configuration error of this executor', async () => {
    const none = new SigningKeyring({ resolver: new CredentialResolver(undefined, 100) });
    await expect(none.keys('hooks')).rejects.toMatchObject({ code: 'invalid_config' });
  });
});
