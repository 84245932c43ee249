import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createPg } from '@requester/shared';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { requesterInProcess } from '../../../test/cli.fixture.ts';

const database = uniqueName('dests').replaceAll('-', '_');
const DATABASE_URL = `postgres://postgres@127.0.0.1:5432/${database}`;
const dir = mkdtempSync(path.join(tmpdir(), 'requester-dests-'));

const cli = (...args: string[]) => requesterInProcess(['destinations', ...args], { DATABASE_URL });

afterAll(async () => {
  const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
  await admin.unsafe(`drop database if exists "${database}" with (force)`).catch(() => {});
  await admin.end({ timeout: 5 });
});

describe('requester destinations', () => {
  it('creates, updates (a new version), lists, shows and deletes', async () => {
    const created = await cli(
      'create',
      'partner-billing',
      '--base-url',
      'https://api.partner.example/v2',
      '--header',
      'X-Partner-Account: 1234',
      '--rate',
      '50/1s',
      '--rate',
      '1000/m',
      '--retry-max',
      '5',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({
      name: 'partner-billing',
      version: 1,
      baseUrl: 'https://api.partner.example/v2',
      headers: { 'X-Partner-Account': '1234' },
      limiter: {
        algorithm: 'token-bucket',
        rates: [
          { value: 50, duration: '1s' },
          { value: 1000, duration: '1m' },
        ],
      },
      retry: { max: 5 },
    });
    const file = path.join(dir, 'spec.json');
    writeFileSync(file, JSON.stringify({ maxBodyBytes: 4096 }));
    const updated = await cli('update', 'partner-billing', '--from-file', file, '--rate', '20/1s', '--json');
    expect(updated.code, updated.stderr).toBe(0);
    expect(JSON.parse(updated.stdout)).toMatchObject({
      version: 2,
      maxBodyBytes: 4096,
      headers: { 'X-Partner-Account': '1234' },
      limiter: { rates: [{ value: 20, duration: '1s' }] },
    });
    const listed = await cli('list', '--json');
    expect(JSON.parse(listed.stdout)).toMatchObject([{ name: 'partner-billing', version: 2 }]);
    const table = await cli('list');
    expect(table.stdout).toContain('https://api.partner.example/v2');
    const shown = await cli('show', 'partner-billing', '--json');
    expect(JSON.parse(shown.stdout).versions.map((v: { version: number }) => v.version)).toEqual([2, 1]);
    expect((await cli('delete', 'partner-billing')).code).toBe(0);
    const gone = await cli('show', 'partner-billing');
    expect(gone.code).toBe(2);
    expect(gone.stderr).toContain('no destination named partner-billing');
  }, 120_000);

  it('takes a calendar quota (from a file) and a default deadline, and shows them', async () => {
    const file = path.join(dir, 'quota.json');
    const quota = { value: 1_000_000, period: 'month', resetDay: 15 };
    writeFileSync(file, JSON.stringify({ limiter: { algorithm: 'token-bucket', quota } }));
    const created = await cli(
      'create',
      'partner-monthly',
      '--base-url',
      'https://api.partner.example',
      '--from-file',
      file,
      '--deadline',
      '5m',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ deadline: '5m', limiter: { rates: [], quota } });
    const table = await cli('list');
    expect(table.stdout).toMatch(/quota 1000000\/month from day 15 \(UTC\)/);
    expect(table.stdout).toMatch(/\b5m\b/);
    const bad = await cli('create', 'partner-bad', '--base-url', 'https://b.example', '--deadline', 'soon');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('deadline');
    expect((await cli('delete', 'partner-monthly')).code).toBe(0);
  }, 120_000);

  it('takes breaker settings and pacing off, shows them, and an update replaces the breaker settings as a whole', async () => {
    const created = await cli(
      'create',
      'partner-strict',
      '--base-url',
      'https://api.partner.example',
      '--breaker-threshold',
      '2',
      '--breaker-open',
      '1m',
      '--pacing',
      'off',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({
      breaker: { failureThreshold: 2, openDuration: '1m' },
      pacing: false,
    });
    const table = await cli('list');
    expect(table.stdout).toContain('own: 2 failures, open 1m');
    expect(table.stdout).toMatch(/\boff\b/);
    const updated = await cli(
      'update',
      'partner-strict',
      '--breaker-max-open',
      '10m',
      '--pacing',
      'on',
      '--json',
    );
    expect(updated.code, updated.stderr).toBe(0);
    const spec = JSON.parse(updated.stdout);
    expect(spec).toMatchObject({ version: 2, breaker: { maxOpenDuration: '10m' }, pacing: true });
    expect(spec.breaker.failureThreshold).toBeUndefined();
    const bad = await cli('update', 'partner-strict', '--breaker-threshold', '0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('breaker.failureThreshold');
    expect((await cli('delete', 'partner-strict')).code).toBe(0);
  }, 120_000);

  it('refuses bad input as a usage error naming the field', async () => {
    const absolute = await cli('create', 'bad', '--base-url', 'https://x.example/?q=1');
    expect(absolute.code).toBe(2);
    expect(absolute.stderr).toContain('baseUrl');
    const credential = await cli('create', 'bad', '--base-url', 'https://x.example', '--credentials', 'nope');
    expect(credential.code).toBe(2);
    expect(credential.stderr).toContain('no live credential named nope');
    const rate = await cli('create', 'bad', '--base-url', 'https://x.example', '--rate', 'fast');
    expect(rate.code).toBe(2);
    expect(rate.stderr).toContain('--rate');
  }, 120_000);

  it('keys create|update --destinations limits a key to destinations', async () => {
    const keys = (...args: string[]) => requesterInProcess(['keys', ...args], { DATABASE_URL });
    const name = uniqueName('k');
    const created = await keys('create', '--name', name, '--destinations', 'a,b', '--json');
    expect(created.code, created.stderr).toBe(0);
    const listed = async () =>
      (
        JSON.parse((await keys('list', '--json')).stdout) as Array<{ name: string; destinations?: string[] }>
      ).find((k) => k.name === name);
    expect((await listed())?.destinations).toEqual(['a', 'b']);
    expect((await keys('update', name, '--destinations', 'c')).code).toBe(0);
    expect((await listed())?.destinations).toEqual(['c']);
    expect((await keys('update', name, '--destinations', '')).code).toBe(0);
    expect((await listed())?.destinations).toBeUndefined();
  }, 120_000);
});
