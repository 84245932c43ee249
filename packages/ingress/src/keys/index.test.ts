import { ValidationError } from '@requester/shared/errors';
import { testPg } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkHostPattern, KeyStore, parseRate, parseToken, secretMatches } from './index.ts';

describe('KeyStore (PostgreSQL)', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  let store: KeyStore;
  beforeAll(async () => {
    pg = await testPg();
    store = new KeyStore(pg.sql);
  });
  afterAll(() => pg.drop());

  it('creates a key shown once as rqk_<id>_<secret>, storing only a hash of the secret', async () => {
    const issued = await store.create({
      name: 'billing',
      hosts: ['*.Partner.example'],
      rate: '200/s',
      sync: true,
    });
    const token = parseToken(issued.token);
    expect(token?.id).toBe(issued.id);
    const record = await store.find(issued.id);
    expect(record).toMatchObject({
      name: 'billing',
      hosts: ['*.partner.example'],
      rate: '200/s',
      sync: true,
      schedule: false,
    });
    const [row] = await pg.sql`select * from requester_api_keys where id = ${issued.id}`;
    expect(JSON.stringify(row)).not.toContain(token?.secret);
    expect(secretMatches(record!, token!.secret)).toBe(true);
    const wrong = token!.secret.replace(/.$/, (last) => (last === 'A' ? 'B' : 'A'));
    expect(secretMatches(record!, wrong)).toBe(false);
  });

  it('refuses a second live key of one name, and accepts it again once the first is revoked', async () => {
    await store.create({ name: 'twice' });
    await expect(store.create({ name: 'twice' })).rejects.toThrow(/a live key named twice exists/);
    expect(await store.revoke('twice')).toBe(true);
    expect(await store.revoke('twice')).toBe(false);
    await store.create({ name: 'twice' });
    expect((await store.list()).filter((k) => k.name === 'twice')).toHaveLength(1);
    expect((await store.list(true)).filter((k) => k.name === 'twice')).toHaveLength(2);
  });

  it('rotates: a new secret at once, the old one until the grace period ends', async () => {
    const first = await store.create({ name: 'rotating' });
    const rotated = await store.rotate('rotating', 60_000);
    expect(rotated?.id).toBe(first.id);
    const record = (await store.find(first.id))!;
    const oldSecret = parseToken(first.token)!.secret;
    const newSecret = parseToken(rotated!.token)!.secret;
    expect(secretMatches(record, newSecret)).toBe(true);
    expect(secretMatches(record, oldSecret)).toBe(true);
    expect(secretMatches(record, oldSecret, Date.now() + 61_000)).toBe(false);
    expect(await store.rotate('nobody', 1)).toBeUndefined();
  });

  it('keeps a default deadline per key: set at creation, changed, removed; a bad one refused', async () => {
    const issued = await store.create({ name: 'quotes', deadline: '30s' });
    expect((await store.find(issued.id))?.deadline).toBe('30s');
    expect(await store.setDeadline('quotes', '2m')).toBe(true);
    expect((await store.find(issued.id))?.deadline).toBe('2m');
    expect(await store.setDeadline('quotes', undefined)).toBe(true);
    expect((await store.find(issued.id))?.deadline).toBeUndefined();
    expect(await store.setDeadline('nobody', '1m')).toBe(false);
    for (const bad of ['soon', '500us', '2026-12-01T09:00:00Z', '-1m'])
      await expect(store.create({ name: 'bad-deadline', deadline: bad })).rejects.toThrow(ValidationError);
    await expect(store.setDeadline('quotes', '0s')).rejects.toThrow(/at least 1ms/);
  });
});

describe('key fields', () => {
  it('parses rates as count per window', () => {
    expect(parseRate('200/s')).toEqual({ value: 200, duration: '1s' });
    expect(parseRate('1000/10m')).toEqual({ value: 1000, duration: '10m' });
    expect(parseRate('50/100ms')).toEqual({ value: 50, duration: '100ms' });
    for (const bad of ['200', '0/s', 's/200', '200/fortnight'])
      expect(() => parseRate(bad)).toThrow(ValidationError);
  });

  it('accepts host names and *.domain patterns only', () => {
    expect(checkHostPattern('*.Partner.example')).toBe('*.partner.example');
    expect(checkHostPattern('api.x.com')).toBe('api.x.com');
    for (const bad of ['*', 'a.*.com', 'http://x.com', 'x.com/path', '*.'])
      expect(() => checkHostPattern(bad)).toThrow(ValidationError);
  });

  it('reads only tokens shaped like ours', () => {
    expect(parseToken(`rqk_0123456789ab_${'a'.repeat(43)}`)).toEqual({
      id: '0123456789ab',
      secret: 'a'.repeat(43),
    });
    expect(parseToken('Bearer x')).toBeUndefined();
    expect(parseToken('rqk_0123456789ab_short')).toBeUndefined();
  });
});
