import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CredentialStore, createPg, parseMasterKeys } from '@requester/shared';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { requester, requesterInProcess } from '../../../test/cli.fixture.ts';

const database = uniqueName('creds').replaceAll('-', '_');
const DATABASE_URL = `postgres://postgres@127.0.0.1:5432/${database}`;
const [OLD, NEW] = [`old:${randomBytes(32).toString('base64')}`, `new:${randomBytes(32).toString('base64')}`];
const SECRET = `cs-${randomBytes(16).toString('hex')}`;
const dir = mkdtempSync(path.join(tmpdir(), 'requester-creds-'));
const secretFile = path.join(dir, 'secret');
writeFileSync(secretFile, `${SECRET}\n`);

const cli = (masterKey: string, ...args: string[]) =>
  requesterInProcess(['credentials', ...args], { DATABASE_URL, CREDENTIALS_MASTER_KEY: masterKey });

afterAll(async () => {
  const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
  await admin.unsafe(`drop database if exists "${database}" with (force)`).catch(() => {});
  await admin.end({ timeout: 5 });
});

describe('requester credentials', () => {
  it('creates, lists without secrets, re-wraps under a new master key, rotates and revokes', async () => {
    const flags = ['--token-url', 'https://auth.partner.example/token', '--client-id', 'requester'];
    const created = await cli(
      OLD,
      'create',
      'partner-billing',
      '--origins',
      'https://api.partner.example',
      ...flags,
      '--client-secret-file',
      secretFile,
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({
      name: 'partner-billing',
      version: 1,
      masterKeyId: 'old',
      origins: ['https://api.partner.example:443'],
    });
    const listed = await cli(OLD, 'list', '--json');
    expect(JSON.parse(listed.stdout)).toMatchObject([
      { name: 'partner-billing', summary: { oauth2: { tokenUrl: 'https://auth.partner.example/token' } } },
    ]);
    // Master key rotation: the new key first, the old one still held while re-wrapping.
    const rewrapped = await cli(`${NEW},${OLD}`, 'rewrap', '--json');
    expect(JSON.parse(rewrapped.stdout)).toEqual({ rewrapped: 1 });
    const sql = createPg({ url: DATABASE_URL, max: 1 });
    try {
      const opened = await new CredentialStore(sql, parseMasterKeys(NEW)).open('partner-billing');
      expect(opened.credential?.secrets.oauth2?.clientSecret).toBe(SECRET);
    } finally {
      await sql.end({ timeout: 5 });
    }
    const rotated = await cli(
      NEW,
      'rotate',
      'partner-billing',
      ...flags,
      '--client-secret-file',
      secretFile,
      '--json',
    );
    expect(JSON.parse(rotated.stdout)).toMatchObject({ version: 2, masterKeyId: 'new' });
    expect((await cli(NEW, 'revoke', 'partner-billing')).code).toBe(0);
    const again = await cli(NEW, 'revoke', 'partner-billing');
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('no live credential named partner-billing');
    for (const out of [created, listed, rewrapped, rotated, again])
      expect(out.stdout + out.stderr).not.toContain(SECRET);
  }, 180_000);

  it('refuses bad input as a usage error naming the field, never echoing the secret', async () => {
    const bad = await cli(
      OLD,
      'create',
      'broken',
      '--origins',
      'https://a.test',
      '--token-url',
      'ftp://x',
      '--client-id',
      'a',
      '--client-secret-file',
      secretFile,
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('oauth2.tokenUrl');
    expect(bad.stderr).not.toContain(SECRET);
    const valid = [
      '--origins',
      'https://a.test',
      '--token-url',
      'https://a.test/token',
      '--client-id',
      'a',
      '--client-secret-file',
      secretFile,
    ];
    const none = await requesterInProcess(['credentials', 'create', 'x', ...valid], { DATABASE_URL });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('CREDENTIALS_MASTER_KEY');
  }, 120_000);

  it('keeps signing keys: create from a file of secrets, import-signing moves SIGNING_KEYS (twice changes nothing)', async () => {
    const whsec = `whsec_${randomBytes(24).toString('base64')}`;
    const plain = `hex:${randomBytes(20).toString('hex')}`;
    const signingFile = path.join(dir, 'signing.txt');
    writeFileSync(signingFile, `# new first, old still signing\n${whsec}\n\n`);
    const created = await cli(
      OLD,
      'create',
      'hooks',
      '--signing-secret-file',
      signingFile,
      '--origins',
      'https://hooks.example',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({
      name: 'hooks',
      kind: 'signing',
      summary: { signing: { scheme: 'standard-webhooks', secrets: 1 } },
    });
    const env = {
      DATABASE_URL,
      CREDENTIALS_MASTER_KEY: OLD,
      SIGNING_KEYS: `legacy=${plain}; legacy=${plain.replace('hex:', 'hex:ff')} ;hooks=${whsec};bad/id=${plain}`,
    };
    const imported = await requesterInProcess(['credentials', 'import-signing', '--json'], env);
    expect(imported.code, imported.stderr).toBe(0);
    expect(JSON.parse(imported.stdout)).toEqual([
      { keyId: 'legacy', secrets: 2, outcome: 'created', version: 1 },
      { keyId: 'hooks', secrets: 1, outcome: 'exists' },
      { keyId: 'bad/id', secrets: 1, outcome: 'bad-name' },
    ]);
    const again = await requesterInProcess(['credentials', 'import-signing', '--json'], env);
    expect(JSON.parse(again.stdout).map((k: { outcome: string }) => k.outcome)).toEqual([
      'exists',
      'exists',
      'bad-name',
    ]);
    const sql = createPg({ url: DATABASE_URL, max: 1 });
    try {
      const opened = await new CredentialStore(sql, parseMasterKeys(OLD)).open('legacy');
      expect(opened.credential?.secrets.signing).toEqual([plain, plain.replace('hex:', 'hex:ff')]);
    } finally {
      await sql.end({ timeout: 5 });
    }
    const table = await cli(OLD, 'list');
    expect(table.stdout).toMatch(/legacy\s+signing\s+1\s+none: refused \(set-origins\)/);
    for (const out of [created, imported, again, table])
      for (const secret of [whsec, whsec.slice(6), plain.slice(4)])
        expect(out.stdout + out.stderr).not.toContain(secret);
  }, 180_000);
});

describe('requester credentials: origins and stdin', () => {
  it('create needs --origins; set-origins names them for an older credential; --from-file - reads stdin', async () => {
    const json = JSON.stringify({
      oauth2: { tokenUrl: 'https://auth.x.example/token', clientId: 'c', clientSecret: SECRET },
    });
    const without = await cli(OLD, 'create', 'no-origins', '--from-file', path.join(dir, 'none.json'));
    expect(without.code).toBe(2);
    expect(without.stderr).toContain('needs --origins');
    // The README's way to keep a secret out of files: the credential on stdin.
    const piped = requester(
      [
        'credentials',
        'create',
        'from-stdin',
        '--from-file',
        '-',
        '--origins',
        'https://api.x.example:8443',
        '--json',
      ],
      {
        DATABASE_URL,
        CREDENTIALS_MASTER_KEY: OLD,
      },
    );
    piped.child.stdin?.end(json);
    const created = await piped.exit;
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({
      name: 'from-stdin',
      kind: 'oauth2',
      origins: ['https://api.x.example:8443'],
    });
    const moved = await cli(
      OLD,
      'set-origins',
      'from-stdin',
      '--origins',
      'https://api.x.example,https://eu.x.example',
      '--json',
    );
    expect(moved.code, moved.stderr).toBe(0);
    expect(JSON.parse(moved.stdout).origins).toEqual([
      'https://api.x.example:443',
      'https://eu.x.example:443',
    ]);
    const bad = await cli(OLD, 'set-origins', 'from-stdin', '--origins', 'https://x.example/path');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('scheme://host[:port] only');
    const nobody = await cli(OLD, 'set-origins', 'nobody', '--origins', 'https://x.example');
    expect(nobody.code).toBe(2);
    expect(nobody.stderr).toContain('no live credential named nobody');
    for (const out of [created, moved]) expect(out.stdout + out.stderr).not.toContain(SECRET);
  }, 120_000);
});
