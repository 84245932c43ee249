import { FairQueue } from '@requester/queue';
import { createPg, createRedis } from '@requester/shared';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { requesterInProcess } from '../../../test/cli.fixture.ts';

const database = uniqueName('keys').replaceAll('-', '_');
const prefix = uniqueName('keysq').replaceAll('-', '_').slice(0, 30);
const env = {
  DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${database}`,
  REDIS_URL: 'redis://127.0.0.1:6379',
  REDIS_PREFIX: prefix,
  QUEUE_SHARDS: '4',
};
const cli = (...args: string[]) => requesterInProcess(['keys', ...args], env);

afterAll(async () => {
  const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
  await admin.unsafe(`drop database if exists "${database}" with (force)`).catch(() => {});
  await admin.end({ timeout: 5 });
});

// Each test runs up to a dozen CLI processes, each loading the whole program: on a loaded box
// (the suite's parallel files and a CPU hog beside them) that alone took the default minute.
describe('requester keys', { timeout: 180_000 }, () => {
  it('creates a key (token alone on stdout), lists it without its secret, rotates and revokes it', async () => {
    const created = await cli(
      'create',
      '--name',
      'billing',
      '--hosts',
      '*.partner.example',
      '--rate',
      '5/s',
      '--sync',
    );
    expect(created.code).toBe(0);
    const token = created.stdout.trim();
    expect(token).toMatch(/^rqk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
    const id = token.split('_')[1];

    const listed = await cli('list', '--json');
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain(token.slice(17));
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ id, name: 'billing', hosts: ['*.partner.example'], rate: '5/s', sync: true }),
    ]);

    const rotated = await cli('rotate', 'billing', '--grace', '1m');
    expect(rotated.code).toBe(0);
    expect(rotated.stdout.trim()).toMatch(new RegExp(`^rqk_${id}_`));
    expect(rotated.stdout.trim()).not.toBe(token);

    expect((await cli('revoke', id!)).code).toBe(0);
    expect(JSON.parse((await cli('list', '--json')).stdout)).toEqual([]);
    const again = await cli('revoke', id!);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`no live key with id or name ${id}`);
  });

  it('allows and withdraws Kafka entry (create --kafka-entry, update --kafka-entry / --no-kafka-entry)', async () => {
    expect((await cli('create', '--name', 'jobs', '--kafka-entry')).code).toBe(0);
    expect((await cli('create', '--name', 'web')).code).toBe(0);
    const entries = async () =>
      Object.fromEntries(
        (
          JSON.parse((await cli('list', '--json')).stdout) as Array<{ name: string; kafkaEntry: boolean }>
        ).map((k) => [k.name, k.kafkaEntry]),
      );
    expect(await entries()).toMatchObject({ jobs: true, web: false });
    expect((await cli('update', 'web', '--kafka-entry')).code).toBe(0);
    expect((await cli('update', 'jobs', '--no-kafka-entry')).code).toBe(0);
    expect(await entries()).toMatchObject({ jobs: false, web: true });
    const vague = await cli('update', 'web');
    expect(vague.code).toBe(2);
    expect(vague.stderr).toContain(
      '--kafka-entry, --no-kafka-entry, --virtual-hosts, --no-virtual-hosts, --weight N, --max-in-flight N, --destinations a,b or --deadline 5m',
    );
    expect((await cli('update', 'nobody', '--kafka-entry')).code).toBe(2);
  });

  it("gives a key a default deadline (create|update --deadline; update --deadline '' removes it)", async () => {
    expect((await cli('create', '--name', 'quotes', '--deadline', '30s')).code).toBe(0);
    const deadlineOf = async () =>
      (JSON.parse((await cli('list', '--json')).stdout) as Array<{ name: string; deadline?: string }>).find(
        (k) => k.name === 'quotes',
      )?.deadline;
    expect(await deadlineOf()).toBe('30s');
    expect((await cli('update', 'quotes', '--deadline', '2m')).code).toBe(0);
    expect(await deadlineOf()).toBe('2m');
    expect((await cli('list')).stdout).toMatch(/\bquotes\b.*\b2m\b/);
    expect((await cli('update', 'quotes', '--deadline', '')).code).toBe(0);
    expect(await deadlineOf()).toBeUndefined();
    const bad = await cli('update', 'quotes', '--deadline', 'later');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('deadline: must be a Go duration');
  });

  it('lets a key send its own Host headers (update --virtual-hosts / --no-virtual-hosts) and keeps host:port scopes', async () => {
    expect((await cli('create', '--name', 'vhosts', '--hosts', '127.0.0.1:8081,*.x.example')).code).toBe(0);
    const key = async () =>
      (JSON.parse((await cli('list', '--json')).stdout) as Array<{ name: string }>).find(
        (k) => k.name === 'vhosts',
      );
    expect(await key()).toMatchObject({ hosts: ['127.0.0.1:8081', '*.x.example'] });
    expect((await key()) as object).not.toHaveProperty('virtualHosts');
    expect((await cli('update', 'vhosts', '--virtual-hosts')).code).toBe(0);
    expect(await key()).toMatchObject({ virtualHosts: true });
    expect((await cli('update', 'vhosts', '--no-virtual-hosts')).code).toBe(0);
    expect((await key()) as object).not.toHaveProperty('virtualHosts');
    const bad = await cli('create', '--name', 'bad-port', '--hosts', 'x.example:0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('optional :port');
  });

  it('gives a key its weight (create|update --weight): stored with the key and in every queue shard', async () => {
    const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    const queue = new FairQueue({ redis, prefix: `${prefix}:`, shards: 4, notify: false });
    try {
      expect((await cli('create', '--name', 'checkout', '--weight', '3')).code).toBe(0);
      expect((await cli('create', '--name', 'bulk')).code).toBe(0);
      expect(await queue.clientWeights()).toEqual(new Map([['checkout', 3]]));
      expect((await cli('update', 'bulk', '--weight', '2')).code).toBe(0);
      expect((await cli('update', 'checkout', '--weight', '1')).code).toBe(0);
      const weights = Object.fromEntries(
        (JSON.parse((await cli('list', '--json')).stdout) as Array<{ name: string; weight?: number }>).map(
          (k) => [k.name, k.weight ?? 1],
        ),
      );
      expect(weights).toMatchObject({ checkout: 1, bulk: 2 });
      // every shard holds the weight its lease script reads
      for (let shard = 0; shard < 4; shard++) {
        expect(await redis.hgetall(`${prefix}:{q:${shard}}:shares`)).toEqual({ bulk: '2' });
      }
      const bad = await cli('update', 'bulk', '--weight', '0');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('weight: must be a whole number from 1 to 1000');
    } finally {
      await redis.del(...Array.from({ length: 4 }, (_, s) => `${prefix}:{q:${s}}:shares`));
      await queue.close();
      redis.disconnect();
    }
  });

  it('gives a key its cap of tasks in flight (create|update --max-in-flight): with the key and in the queue', async () => {
    const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    const queue = new FairQueue({ redis, prefix: `${prefix}:`, shards: 4, notify: false });
    try {
      expect((await cli('create', '--name', 'reports', '--max-in-flight', '2')).code).toBe(0);
      expect((await cli('create', '--name', 'uncapped')).code).toBe(0);
      expect(await queue.clientCaps()).toEqual(new Map([['reports', 2]]));
      expect((await cli('update', 'uncapped', '--max-in-flight', '5')).code).toBe(0);
      expect((await cli('update', 'reports', '--max-in-flight', '0')).code).toBe(0);
      const caps = Object.fromEntries(
        (
          JSON.parse((await cli('list', '--json')).stdout) as Array<{ name: string; maxInFlight?: number }>
        ).map((k) => [k.name, k.maxInFlight ?? 0]),
      );
      expect(caps).toMatchObject({ reports: 0, uncapped: 5 });
      // every shard says who is capped; the client's own slot holds the cap its slots count against
      for (let shard = 0; shard < 4; shard++) {
        expect(await redis.hgetall(`${prefix}:{q:${shard}}:caps`)).toEqual({ uncapped: '5' });
      }
      expect(await redis.get(`${prefix}:{c:uncapped}:cap`)).toBe('5');
      expect(await redis.get(`${prefix}:{c:reports}:cap`)).toBeNull();
      const bad = await cli('update', 'uncapped', '--max-in-flight', '-1');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('maxInFlight: must be a whole number from 0 (no cap)');
    } finally {
      await redis.del(
        `${prefix}:{c:uncapped}:cap`,
        ...Array.from({ length: 4 }, (_, s) => `${prefix}:{q:${s}}:caps`),
      );
      await queue.close();
      redis.disconnect();
    }
  });

  it('refuses bad scopes as usage errors naming the field', async () => {
    const bad = await cli('create', '--name', 'x', '--rate', 'lots');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('rate: "lots" is not <count>/<unit>');
  });

  it('bootstraps the first admin key from BOOTSTRAP_ADMIN_KEY once, never printing the token', async () => {
    const made = await cli('token');
    expect(made.code).toBe(0);
    const token = made.stdout.trim();
    expect(token).toMatch(/^rqk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
    expect((await cli('token')).stdout.trim()).not.toBe(token);

    const withKey = { ...env, BOOTSTRAP_ADMIN_KEY: token, LOG_LEVEL: 'debug' };
    const migrate = () => requesterInProcess(['migrate', '--json'], withKey);
    const first = await migrate();
    expect(first.code).toBe(0);
    const id = token.split('_')[1];
    expect(JSON.parse(first.stdout)).toMatchObject({ bootstrapKey: id });
    expect(first.stdout + first.stderr).not.toContain(token.slice(17));
    const admins = () =>
      cli('list', '--all', '--json').then((r) =>
        (
          JSON.parse(r.stdout) as Array<{ id: string; name: string; admin?: string; revokedAt?: string }>
        ).filter((k) => k.name === 'admin'),
      );
    expect(await admins()).toEqual([expect.objectContaining({ id, admin: 'write' })]);

    // Once: a second run leaves the key alone, and a revoked bootstrap key stays revoked.
    expect(JSON.parse((await migrate()).stdout)).toMatchObject({ bootstrapKey: null });
    expect((await cli('revoke', 'admin')).code).toBe(0);
    const third = await migrate();
    expect(JSON.parse(third.stdout)).toMatchObject({ bootstrapKey: null });
    expect(third.stderr).toContain('a key named admin exists already');
    expect(await admins()).toEqual([expect.objectContaining({ id, revokedAt: expect.any(String) })]);
  });

  it('refuses a malformed BOOTSTRAP_ADMIN_KEY without echoing it', async () => {
    const bad = await requesterInProcess(['migrate'], { ...env, BOOTSTRAP_ADMIN_KEY: 'hunter2-not-a-token' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('BOOTSTRAP_ADMIN_KEY');
    expect(bad.stderr).not.toContain('hunter2');
  });
});
