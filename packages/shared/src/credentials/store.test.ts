import { randomBytes } from 'node:crypto';
import { makeTestPki, testPg } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../errors/index.ts';
import {
  CredentialStore,
  credentialOriginRefusal,
  parseCredentialOrigins,
  parseMasterKeys,
} from './index.ts';

const keyText = (id: string) => `${id}:${randomBytes(32).toString('base64')}`;
const SECRET = `cs-${randomBytes(12).toString('hex')}`;
const ORIGIN = 'https://api.partner.example';
const oauth2 = (secret = SECRET) => ({
  oauth2: { tokenUrl: 'https://auth.example/token', clientId: 'billing', clientSecret: secret, scope: 'pay' },
});

describe('CredentialStore (PostgreSQL)', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  const oldKey = keyText('k1');
  const newKey = keyText('k2');
  beforeAll(async () => {
    pg = await testPg();
  });
  afterAll(() => pg.drop());

  it('keeps the secrets sealed at rest and opens them with the master key', async () => {
    const store = new CredentialStore(pg.sql, parseMasterKeys(oldKey));
    const info = await store.create('partner-billing', oauth2(), ORIGIN);
    expect(info).toMatchObject({
      name: 'partner-billing',
      version: 1,
      masterKeyId: 'k1',
      origins: ['https://api.partner.example:443'],
    });
    expect(info.summary).toEqual({
      oauth2: { tokenUrl: 'https://auth.example/token', authMethod: 'client_secret_basic', scope: 'pay' },
    });
    const rows = await pg.sql`select * from requester_credentials`;
    expect(JSON.stringify(rows)).not.toContain(SECRET);
    expect(
      Buffer.concat(rows.flatMap((r) => [r.data as Buffer, r.wrapped_key as Buffer])).includes(SECRET),
    ).toBe(false);
    const { credential } = await store.open('partner-billing');
    expect(credential?.secrets.oauth2?.clientSecret).toBe(SECRET);
    expect(JSON.stringify(await store.list())).not.toContain(SECRET);
  });

  it('re-wraps under a new master key while old and new both open every row (rotation without downtime)', async () => {
    const during = new CredentialStore(pg.sql, parseMasterKeys(`${newKey},${oldKey}`));
    await during.create('written-during-rotation', oauth2('second-secret'), ORIGIN);
    // A process still on the old key alone opens the rows it wrapped; one on both opens every row.
    const before = new CredentialStore(pg.sql, parseMasterKeys(oldKey));
    expect((await before.open('partner-billing')).credential?.secrets.oauth2?.clientSecret).toBe(SECRET);
    expect((await during.open('partner-billing')).credential?.secrets.oauth2?.clientSecret).toBe(SECRET);
    expect(await during.rewrap()).toBe(1);
    expect(await during.rewrap()).toBe(0);
    const after = new CredentialStore(pg.sql, parseMasterKeys(newKey));
    expect((await after.open('partner-billing')).credential?.secrets.oauth2?.clientSecret).toBe(SECRET);
    expect((await after.open('written-during-rotation')).credential?.secrets.oauth2?.clientSecret).toBe(
      'second-secret',
    );
    await expect(before.open('partner-billing')).rejects.toThrow(/master key k2/);
  });

  it('rotates secrets (new version), revokes, and tells a revoked name from an unknown one', async () => {
    const store = new CredentialStore(pg.sql, parseMasterKeys(newKey));
    const rotated = await store.rotate('partner-billing', oauth2('rotated-secret'));
    expect(rotated?.version).toBe(2);
    expect((await store.open('partner-billing')).credential).toMatchObject({
      version: 2,
      secrets: { oauth2: { clientSecret: 'rotated-secret' } },
    });
    expect(await store.revoke('partner-billing')).toBe(true);
    expect(await store.revoke('partner-billing')).toBe(false);
    expect(await store.open('partner-billing')).toEqual({ revoked: true });
    expect(await store.open('never-made')).toEqual({ revoked: false });
    expect(await store.liveNames()).toEqual(new Set(['written-during-rotation']));
    expect(await store.rotate('partner-billing', oauth2())).toBeUndefined();
  });

  it('refuses bad input with the field named and never the secret echoed', async () => {
    const store = new CredentialStore(pg.sql, parseMasterKeys(newKey));
    const bad = store.create(
      'bad-key',
      {
        mtls: { cert: 'not-a-cert', key: `-----BEGIN PRIVATE KEY-----${SECRET}` },
      },
      ORIGIN,
    );
    await expect(bad).rejects.toBeInstanceOf(ValidationError);
    await expect(bad).rejects.toThrow(/mtls\.key: is not a PEM private key/);
    await bad.catch((err: Error) => expect(JSON.stringify(err) + err.message).not.toContain(SECRET));
    await expect(store.create('nothing', {}, ORIGIN)).rejects.toThrow(/at least one of oauth2, mtls, proxy/);
    await expect(store.create('bad name!', oauth2(), ORIGIN)).rejects.toThrow(/name/);
    await expect(new CredentialStore(pg.sql, undefined).create('x', oauth2(), ORIGIN)).rejects.toThrow(
      /CREDENTIALS_MASTER_KEY/,
    );
  });

  it('stores a client certificate and summarises it without the key', async () => {
    const pki = makeTestPki();
    const store = new CredentialStore(pg.sql, parseMasterKeys(newKey));
    const info = await store.create(
      'partner-mtls',
      { mtls: { cert: pki.clientCert, key: pki.clientKey, ca: pki.caCert } },
      ORIGIN,
    );
    expect(info.summary.mtls).toMatchObject({ subject: 'CN=client', ca: true });
    expect(JSON.stringify(info)).not.toContain('PRIVATE KEY');
  });
});

describe('credential origins', () => {
  it('are named at creation, normalized, and refused when they are more (or less) than scheme://host[:port]', async () => {
    expect(
      parseCredentialOrigins(
        'https://API.partner.example, http://10.0.0.5:8080,https://api.partner.example:443',
      ),
    ).toEqual(['https://api.partner.example:443', 'http://10.0.0.5:8080']);
    for (const bad of [
      'api.partner.example',
      'ftp://x',
      'https://x/path',
      'https://u:p@x',
      'https://*.x.example',
      'https://x?q=1',
    ])
      expect(() => parseCredentialOrigins(bad)).toThrow(ValidationError);
    expect(() => parseCredentialOrigins(' , ')).toThrow(/at least one origin/);
  });

  it('refuse another scheme, host or port, a foreign Host header, and a credential without origins', () => {
    const origins = ['https://api.partner.example:443', 'http://127.0.0.1:8081'];
    const refusal = (uri: string, headers?: Record<string, string>) =>
      credentialOriginRefusal('pay', origins, uri, headers);
    expect(refusal('https://api.partner.example/orders')).toBeUndefined();
    expect(refusal('https://API.partner.example:443/x', { host: 'api.partner.example' })).toBeUndefined();
    expect(refusal('http://127.0.0.1:8081/x', { Host: '127.0.0.1:8081' })).toBeUndefined();
    expect(refusal('http://127.0.0.1:18601/hello')).toMatch(/may not be sent to http:\/\/127\.0\.0\.1:18601/);
    expect(refusal('http://api.partner.example/orders')).toMatch(/may not be sent/);
    expect(refusal('https://api.partner.example.evil/x')).toMatch(/may not be sent/);
    expect(refusal('http://127.0.0.1:8081/x', { host: 'evil.example' })).toMatch(/Host header/);
    expect(refusal('http://127.0.0.1:8081/x', { host: '127.0.0.1:9999' })).toMatch(/Host header/);
    expect(refusal('http://127.0.0.1:8081/x', { host: '127.0.0.1/evil' })).toMatch(/Host header/);
    expect(credentialOriginRefusal('old', undefined, 'https://api.partner.example/')).toMatch(
      /set-origins old/,
    );
  });

  it('are kept with the credential, opened with it, and replaced by setOrigins (the upgrade of older rows)', async () => {
    const pg = await testPg();
    try {
      const store = new CredentialStore(pg.sql, parseMasterKeys(keyText('k1')));
      await store.create('imported', { signing: `whsec_${randomBytes(24).toString('base64')}` }, null);
      expect((await store.open('imported')).credential?.origins).toBeUndefined();
      expect(await store.liveOrigins()).toEqual(new Map([['imported', undefined]]));
      const set = await store.setOrigins('imported', 'https://hooks.example');
      expect(set?.origins).toEqual(['https://hooks.example:443']);
      expect((await store.open('imported')).credential?.origins).toEqual(['https://hooks.example:443']);
      expect(await store.setOrigins('nobody', 'https://hooks.example')).toBeUndefined();
    } finally {
      await pg.drop();
    }
  });
});

describe('parseMasterKeys', () => {
  it('names the bad entry, never the key', () => {
    expect(() => parseMasterKeys('k1:c2hvcnQ=')).toThrow(/entry 1 \(k1\): the key must be 32 bytes/);
    expect(() => parseMasterKeys(`${keyText('a')},${keyText('a')}`)).toThrow(/listed twice/);
    const keys = parseMasterKeys(`${keyText('new')}\n${keyText('old')}`);
    expect(keys.ids).toEqual(['new', 'old']);
    expect(JSON.stringify(keys)).toBe('{"ids":["new","old"]}');
  });
});
