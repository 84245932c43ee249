import { randomBytes } from 'node:crypto';
import { testPg } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMasterKeys } from '../credentials/index.ts';
import { ValidationError } from '../errors/index.ts';
import { DestinationCatalog, DestinationStore } from './index.ts';

describe('DestinationStore (PostgreSQL)', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  const bound = new Map<string, string[] | undefined>([
    ['billing-oauth', ['https://api.partner.example:443']],
  ]);
  const origins = async (name: string) => (bound.has(name) ? bound.get(name) : null);
  beforeAll(async () => {
    pg = await testPg();
  });
  afterAll(() => pg.drop());

  it('writes a new version on each update, keeps the history, and deletes every version', async () => {
    const store = new DestinationStore(pg.sql, origins);
    const created = await store.create('partner-billing', {
      baseUrl: 'https://API.partner.example/v2/',
      headers: { 'x-partner': 'requester' },
      limiter: { algorithm: 'token-bucket', rates: [{ duration: '1s', value: 5 }] },
    });
    expect(created).toMatchObject({ name: 'partner-billing', version: 1 });
    expect(created.spec.baseUrl).toBe('https://api.partner.example/v2');
    await expect(store.create('partner-billing', { baseUrl: 'https://x.example' })).rejects.toThrow(
      /exists already/,
    );
    const updated = await store.update('partner-billing', { retry: { max: 3 } }, 'ops', true);
    expect(updated).toMatchObject({ version: 2, createdBy: 'ops' });
    expect(updated?.spec).toMatchObject({ baseUrl: 'https://api.partner.example/v2', retry: { max: 3 } });
    expect((await store.get('partner-billing'))?.version).toBe(2);
    expect((await store.history('partner-billing')).map((d) => d.version)).toEqual([2, 1]);
    expect((await store.list()).map((d) => `${d.name}@${d.version}`)).toEqual(['partner-billing@2']);
    expect(await store.delete('partner-billing')).toBe(true);
    expect(await store.get('partner-billing')).toBeUndefined();
    expect(await store.update('partner-billing', { baseUrl: 'https://x.example' })).toBeUndefined();
    // A name created again goes on from its last version: a version never names two specs.
    expect((await store.create('partner-billing', { baseUrl: 'https://x.example' })).version).toBe(3);
  });

  it('refuses a bad spec and a credential not bound to the base URL origin', async () => {
    const store = new DestinationStore(pg.sql, origins);
    await expect(store.create('bad', { baseUrl: 'ftp://x.example' })).rejects.toBeInstanceOf(ValidationError);
    await expect(store.create('bad', { baseUrl: 'https://x.example/?q=1' })).rejects.toThrow(/no query/);
    await expect(store.create('bad', { baseUrl: 'https://x.example', retires: 3 })).rejects.toBeInstanceOf(
      ValidationError,
    );
    await expect(
      store.create('bad', { baseUrl: 'https://other.example', credentials: 'billing-oauth' }),
    ).rejects.toThrow(/not bound to https:\/\/other.example:443/);
    await expect(store.create('bad', { baseUrl: 'https://x.example', credentials: 'nope' })).rejects.toThrow(
      /no live credential named nope/,
    );
    const ok = await store.create('good', {
      baseUrl: 'https://api.partner.example:443/pay',
      credentials: 'billing-oauth',
    });
    expect(ok.spec.credentials).toBe('billing-oauth');
  });

  it('keeps secret headers sealed, names them only, opens them with the master key, keeps them across versions', async () => {
    const masters = parseMasterKeys(`k1:${randomBytes(32).toString('base64')}`);
    const store = new DestinationStore(pg.sql, undefined, masters);
    const secret = `sk-${randomBytes(12).toString('hex')}`;
    const created = await store.create('keyed', {
      baseUrl: 'https://k.example',
      headers: { Accept: 'application/json' },
      secretHeaders: { 'X-Api-Key': secret },
    });
    expect(created.spec.secretHeaderNames).toEqual(['X-Api-Key']);
    expect(JSON.stringify(created)).not.toContain(secret);
    const rows = await pg.sql`select * from requester_destinations where name = 'keyed'`;
    expect(JSON.stringify(rows)).not.toContain(secret);
    expect(Buffer.concat(rows.map((r) => r.secret_data as Buffer)).includes(secret)).toBe(false);
    // An update that does not name them keeps them; one without a master key too.
    await new DestinationStore(pg.sql).update('keyed', { maxBodyBytes: 10 }, 'ops', true);
    const opened = await store.open('keyed');
    expect(opened).toMatchObject({ version: 2, secretHeaders: { 'X-Api-Key': secret } });
    expect(opened?.spec).toMatchObject({ maxBodyBytes: 10, secretHeaderNames: ['X-Api-Key'] });
    // Without the master key they are neither written nor opened.
    await expect(new DestinationStore(pg.sql).open('keyed')).rejects.toThrow(/CREDENTIALS_MASTER_KEY/);
    await expect(
      new DestinationStore(pg.sql).create('k2', { baseUrl: 'https://k.example', secretHeaders: { a: 'b' } }),
    ).rejects.toThrow(/master key/);
    await expect(
      store.create('k3', { baseUrl: 'https://k.example', headers: { a: 'x' }, secretHeaders: { A: 'y' } }),
    ).rejects.toThrow(/plain or secret/);
    // `{}` drops them.
    await store.update('keyed', { secretHeaders: {} }, 'ops', true);
    expect((await store.open('keyed'))?.secretHeaders).toBeUndefined();
  });

  it('catalog: reads a name once per TTL', async () => {
    const store = new DestinationStore(pg.sql);
    await store.create('cached', { baseUrl: 'https://c.example' });
    let reads = 0;
    const catalog = new DestinationCatalog((name) => {
      reads++;
      return store.get(name);
    }, 60_000);
    expect((await catalog.current('cached'))?.version).toBe(1);
    await store.update('cached', { baseUrl: 'https://c2.example' });
    expect((await catalog.current('cached'))?.version).toBe(1);
    expect(reads).toBe(1);
  });
});
