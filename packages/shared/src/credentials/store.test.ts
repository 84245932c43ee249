import { randomBytes } from 'node:crypto';
import { makeTestPki, testPg } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../errors/index.ts';
import { CredentialStore, parseMasterKeys } from './index.ts';

const keyText = (id: string) => `${id}:${randomBytes(32).toString('base64')}`;
const SECRET = `cs-${randomBytes(12).toString('hex')}`;
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
    const info = await store.create('partner-billing', oauth2());
    expect(info).toMatchObject({ name: 'partner-billing', version: 1, masterKeyId: 'k1' });
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
    await during.create('written-during-rotation', oauth2('second-secret'));
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
    const bad = store.create('bad-key', {
      mtls: { cert: 'not-a-cert', key: `-----BEGIN PRIVATE KEY-----${SECRET}` },
    });
    await expect(bad).rejects.toBeInstanceOf(ValidationError);
    await expect(bad).rejects.toThrow(/mtls\.key: is not a PEM private key/);
    await bad.catch((err: Error) => expect(JSON.stringify(err) + err.message).not.toContain(SECRET));
    await expect(store.create('nothing', {})).rejects.toThrow(/at least one of oauth2, mtls, proxy/);
    await expect(store.create('bad name!', oauth2())).rejects.toThrow(/name/);
    await expect(new CredentialStore(pg.sql, undefined).create('x', oauth2())).rejects.toThrow(
      /CREDENTIALS_MASTER_KEY/,
    );
  });

  it('stores a client certificate and summarises it without the key', async () => {
    const pki = makeTestPki();
    const store = new CredentialStore(pg.sql, parseMasterKeys(newKey));
    const info = await store.create('partner-mtls', {
      mtls: { cert: pki.clientCert, key: pki.clientKey, ca: pki.caCert },
    });
    expect(info.summary.mtls).toMatchObject({ subject: 'CN=client', ca: true });
    expect(JSON.stringify(info)).not.toContain('PRIVATE KEY');
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
