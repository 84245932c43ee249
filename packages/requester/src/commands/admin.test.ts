import { readFileSync } from 'node:fs';
import { CircuitBreaker, limiterKeyOf, RateLimiter } from '@requester/policies';
import { queueFromConfig } from '@requester/queue';
import { createPg, createRedis, Outbox, type RedisClient, type Sql } from '@requester/shared';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requesterInProcess } from '../../test/cli.fixture.ts';

/**
 * The admin commands in a child process against the real Redis and PostgreSQL: machine output
 * (`--json`: one JSON document, nothing else on stdout), and state made by the real breaker,
 * outbox, limiter and queue seen (and changed) through the CLI.
 */
const prefix = uniqueName('h14cli');
const database = uniqueName('admin').replaceAll('-', '_');
const databaseUrl = `postgres://postgres@127.0.0.1:5432/${database}`;
const env = { REDIS_PREFIX: prefix, QUEUE_SHARDS: '4', DATABASE_URL: databaseUrl, LOG_LEVEL: 'error' };
const cli = (...args: string[]) => requesterInProcess(args, env);

/** Runs a command with --json and returns its parsed stdout (which must be one JSON document). */
async function json<T = unknown>(...args: string[]): Promise<T> {
  const { code, stdout, stderr } = await cli(...args, '--json');
  expect(code, stderr).toBe(0);
  return JSON.parse(stdout) as T;
}

let redis: RedisClient;
let sql: Sql | undefined;

beforeAll(() => {
  redis = createRedis({ url: 'redis://127.0.0.1:6379' });
});

afterAll(async () => {
  await sql?.end({ timeout: 5 });
  for await (const keys of (redis as import('@requester/shared').Redis).scanStream({
    match: `${prefix}*`,
    count: 1_000,
  }))
    if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
  redis.disconnect();
  const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
  await admin.unsafe(`drop database if exists "${database}" with (force)`).catch(() => {});
  await admin.end({ timeout: 5 });
});

describe('requester admin commands', () => {
  it('--version prints the package version and the Node version on one line', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    const { code, stdout } = await cli('--version');
    expect(code).toBe(0);
    expect(stdout).toBe(`requester ${version} (node ${process.version})\n`);
  });

  it('--json prints one JSON document on stdout for every admin command', async () => {
    expect(await json('migrate')).toMatchObject({ createdDatabase: true, applied: expect.any(Array) });
    expect(await json('config')).toEqual(
      expect.arrayContaining([expect.objectContaining({ env: 'REDIS_PREFIX' })]),
    );
    expect(await json('config', '--effective')).toMatchObject({ REDIS_PREFIX: prefix });
    expect(await json('queue', 'info')).toMatchObject({ totals: { pending: 0 }, shards: expect.any(Array) });
    expect(await json('queue', 'verify')).toEqual({ tasks: 0, violations: [] });
    expect(await json('queue', 'dead', 'list')).toEqual([]);
    expect(await json('queue', 'dead', 'retry', '--all')).toEqual({ retried: 0 });
    expect(await json('queue', 'dead', 'purge', '--yes')).toEqual({ removed: 0 });
    expect(await json('queue', 'purge', '--yes')).toEqual({ removed: 0 });
    expect(await json('breakers', 'list')).toEqual([]);
    expect(await json('breakers', 'show', 'https://nobody.example')).toMatchObject({ state: 'closed' });
    expect(await json('breakers', 'reset', 'https://nobody.example')).toEqual({
      origin: 'https://nobody.example:443',
      reset: false,
      held: null,
    });
    expect(await json('origins')).toEqual([]);
    expect(await json('origins', 'show', 'https://nobody.example/x')).toMatchObject({
      origin: 'https://nobody.example:443',
      breaker: { state: 'closed' },
      pause: null,
      calls: { attempts: 0, successRate: null },
    });
    expect(await json('limiter', 'show', 'nobody')).toEqual([]);
    expect(await json('outbox', 'info')).toMatchObject({ rows: 0, overdue: 0, nextDueAt: null });
    expect(await json('keys', 'list')).toEqual([]);
    const created = await json<{ id: string; token: string }>('keys', 'create', '--name', 'json-test');
    expect(created.token).toMatch(new RegExp(`^rqk_${created.id}_`));
    expect(await json('keys', 'revoke', created.id)).toEqual({ revoked: created.id });
  }, 120_000);

  it('--json of the Kafka commands: topics, dlq list, dlq replay', async () => {
    const name = uniqueName('h14cli');
    const kafka = {
      ...env,
      KAFKA_TOPIC_IN: `${name}.in`,
      KAFKA_TOPIC_OUT: `${name}.out`,
      KAFKA_TOPIC_DLQ: `${name}.dlq`,
      KAFKA_TOPIC_EVENTS: `${name}.events`,
      KAFKA_TOPIC_PARTITIONS: '1',
    };
    const run = async (...args: string[]) => {
      const { code, stdout, stderr } = await requesterInProcess([...args, '--json'], kafka);
      expect(code, stderr).toBe(0);
      return JSON.parse(stdout) as unknown;
    };
    expect(await run('topics')).toEqual({
      topics: [
        kafka.KAFKA_TOPIC_IN,
        kafka.KAFKA_TOPIC_OUT,
        kafka.KAFKA_TOPIC_DLQ,
        kafka.KAFKA_TOPIC_EVENTS,
        // KAFKA_TOPIC_BODIES by default: where the router copies big records of outside producers.
        `${kafka.KAFKA_TOPIC_IN}.bodies`,
      ],
    });
    expect(await run('dlq', 'list')).toEqual([]);
    expect(await run('dlq', 'replay', '--all', '--dry-run')).toMatchObject({ dryRun: true, replayed: [] });
  }, 60_000);

  it('lists a breaker opened by failures through the real breaker, and reset lets the next call through', async () => {
    const breaker = new CircuitBreaker({
      redis,
      prefix: `${prefix}:breaker:`,
      failureThreshold: 2,
      openMs: 600_000,
      stateCacheMs: 0,
    });
    const origin = 'http://127.0.0.1:9';
    for (let i = 0; i < 2; i++) {
      const admission = await breaker.admit(origin);
      expect(admission.admitted).toBe(true);
      if (admission.admitted) await breaker.record(origin, { ...admission, success: false });
    }
    expect(await breaker.admit(origin)).toMatchObject({ admitted: false, state: 'open' });

    const listed = await json<Array<Record<string, unknown>>>('breakers', 'list');
    expect(listed).toEqual([expect.objectContaining({ origin, state: 'open', opensInARow: 1 })]);
    expect(Date.parse(listed[0]?.openUntil as string)).toBeGreaterThan(Date.now());
    const table = await cli('breakers', 'list');
    expect(table.stdout).toMatch(/^ORIGIN\s+STATE\s+HELD\s+OPENS\s+OPEN SINCE\s+OPEN UNTIL/m);
    expect(table.stdout).toMatch(/http:\/\/127\.0\.0\.1:9\s+open\s+-\s+1\s+(now|[\dms]+ ago)\s+in \d+m/);

    const reset = await cli('breakers', 'reset', 'http://127.0.0.1:9/any/path');
    expect(reset.code).toBe(0);
    expect(reset.stderr).toContain('closed the breaker of http://127.0.0.1:9');
    expect(await breaker.admit(origin)).toMatchObject({ admitted: true });
    expect(await json('breakers', 'list')).toEqual([]);
  }, 180_000);

  it('lists a held origin with its hold, and reset ends the hold', async () => {
    const breaker = new CircuitBreaker({
      redis,
      prefix: `${prefix}:breaker:`,
      failureThreshold: 5,
      openMs: 600_000,
      stateCacheMs: 0,
      holdFailures: 2,
    });
    const origin = 'http://127.0.0.1:7';
    for (let i = 0; i < 2; i++) {
      const admission = await breaker.admit(origin);
      if (admission.admitted) await breaker.record(origin, { ...admission, success: false });
    }
    const listed = await json<Array<Record<string, unknown>>>('breakers', 'list');
    // Held origins come first (another test's open breaker may share the list).
    expect(listed[0]).toMatchObject({ origin, held: 'failing', failuresInRun: 2 });
    expect((await cli('breakers', 'list')).stdout).toMatch(/http:\/\/127\.0\.0\.1:7\s+open\s+failing since/);
    const reset = await cli('breakers', 'reset', origin);
    expect(reset.stderr).toContain('and ended its hold (failing)');
    expect(await breaker.heldOrigins()).toEqual([]);
    expect(await breaker.admit(origin)).toMatchObject({ admitted: true });
  }, 180_000);

  it('outbox info counts the rows added through the real Outbox', async () => {
    await cli('migrate');
    sql = createPg({ url: databaseUrl, max: 1 });
    const now = Date.now();
    const row = (n: number, dueAt: number) => ({
      taskId: `${prefix}-${n}:1`,
      requestId: `${prefix}-${n}`,
      dueAt: new Date(dueAt),
      topic: 'in',
      key: null,
      payload: Buffer.alloc(1_000),
    });
    await new Outbox(sql).add([row(1, now - 60_000), row(2, now - 1_000), row(3, now + 7_200_000)]);

    const info = await json<Record<string, unknown>>('outbox', 'info');
    expect(info).toMatchObject({ rows: 3, overdue: 2, payloadBytes: 3_000 });
    expect(Date.parse(info.oldestDueAt as string)).toBeCloseTo(now - 60_000, -3);
    expect(Date.parse(info.nextDueAt as string)).toBeCloseTo(now + 7_200_000, -3);
    const text = await cli('outbox', 'info');
    expect(text.stdout).toMatch(/^rows\s+3$/m);
    expect(text.stdout).toMatch(/^overdue\s+2$/m);
    expect(text.stdout).toMatch(/^next due\s+in 1h59m$|^next due\s+in 2h$/m);
    expect(text.stdout).toMatch(/^payloads\s+2\.9 KiB$/m);
  }, 60_000);

  it('limiter show reflects takes through the real RateLimiter, per algorithm and window', async () => {
    const limiter = new RateLimiter({ redis, prefix: `${prefix}:` });
    const key = `${prefix}-partner`;
    const rates = [
      { duration: '1h', value: 10 },
      { duration: '24h', value: 100 },
    ];
    for (let i = 0; i < 3; i++) {
      expect((await limiter.take({ key, algorithm: 'token-bucket', rates })).allowed).toBe(true);
      expect((await limiter.take({ key, algorithm: 'sliding-window-log', rates })).allowed).toBe(true);
    }
    const windows = await json<Array<Record<string, unknown>>>(
      'limiter',
      'show',
      key,
      '--rate',
      '10/1h',
      '--rate',
      '100/24h',
    );
    const row = (algorithm: string, durationMs: number) =>
      windows.find((w) => w.algorithm === algorithm && w.durationMs === durationMs);
    expect(windows).toHaveLength(4);
    expect(row('sliding-window-log', 3_600_000)).toMatchObject({ value: 10, used: 3, remaining: 7 });
    expect(row('sliding-window-log', 86_400_000)).toMatchObject({ value: 100, used: 3, remaining: 97 });
    expect(row('token-bucket', 3_600_000)).toMatchObject({ value: 10, remaining: 7 });
    expect(row('token-bucket', 3_600_000)?.used).toBeCloseTo(3, 1);
    expect(row('token-bucket', 86_400_000)).toMatchObject({ value: 100, remaining: 97 });
    // The bucket is full again once its level has leaked: 3 calls of 10/h = 18 minutes.
    expect(Date.parse(row('token-bucket', 3_600_000)?.resetAt as string) - Date.now()).toBeGreaterThan(
      17 * 60_000,
    );

    const raw = await json<Array<Record<string, unknown>>>('limiter', 'show', key);
    expect(raw).toContainEqual(
      expect.objectContaining({ algorithm: 'sliding-window-log', durationMs: null, used: 3 }),
    );
    expect(raw).toContainEqual(
      expect.objectContaining({
        algorithm: 'token-bucket',
        durationMs: 3_600_000,
        used: null,
        remaining: null,
      }),
    );
    const table = await cli('limiter', 'show', key, '--rate', '10/h');
    expect(table.stdout).toMatch(/^sliding-window-log\s+1h\s+10\s+3\s+7\s+in 59m/m);

    // A client's key is its own: --client names whose (what the executor spends for it).
    await limiter.take({
      key: limiterKeyOf('billing', key, new Set()),
      algorithm: 'sliding-window-log',
      rates,
    });
    const billing = await json<Array<Record<string, unknown>>>('limiter', 'show', key, '--client', 'billing');
    expect(billing).toEqual([expect.objectContaining({ algorithm: 'sliding-window-log', used: 1 })]);
  }, 60_000);

  it('limiter show gives a calendar quota: units spent and left, and its reset', async () => {
    const limiter = new RateLimiter({ redis, prefix: `${prefix}:` });
    const key = `${prefix}-monthly`;
    const quota = { value: 1_000, period: 'month' as const, resetDay: 31, timeZone: 'Europe/Paris' };
    expect(
      (await limiter.take({ key, algorithm: 'fixed-window-counter', rates: [], quota }, 40)).allowed,
    ).toBe(true);
    const [shown] = await json<Array<Record<string, unknown>>>('limiter', 'show', key, '--quota', '1000');
    expect(shown).toMatchObject({
      algorithm: 'calendar-quota',
      calendar: 'month:31:Europe/Paris',
      value: 1_000,
      used: 40,
      remaining: 960,
    });
    expect(Date.parse(shown?.resetAt as string)).toBeGreaterThan(Date.now());
    const table = await cli('limiter', 'show', key, '--quota', '1000');
    expect(table.stdout).toMatch(
      /^calendar-quota\s+month from day 31 \(Europe\/Paris\)\s+1000\s+40\s+960\s+in /m,
    );
  }, 60_000);

  it('keeps the old queue dead-task names working, hidden, with a deprecation notice', async () => {
    const queue = queueFromConfig({ redisPrefix: prefix, queueShards: 4, queueDedupWindow: 60_000 }, redis, {
      notify: false,
    });
    const id = `${prefix}-stuck:1`;
    await queue.publish([{ id, payload: 'p' }]);
    const { tasks } = await queue.lease(1, 60_000);
    expect(tasks).toHaveLength(1);
    await queue.deadLetter(tasks[0]!.token, 'crashed the worker');
    await queue.close();

    const old = await cli('queue', 'dlq', '--json');
    expect(old.code).toBe(0);
    expect(old.stderr).toContain('`requester queue dlq` is deprecated; use `requester queue dead list`');
    expect(JSON.parse(old.stdout)).toEqual([expect.objectContaining({ id, reason: 'crashed the worker' })]);
    const listed = await cli('queue', 'dead', 'list');
    expect(listed.stdout).toMatch(
      new RegExp(`^${id}\\s+${id}\\s+crashed the worker\\s+(now|\\d+s ago)\\s+1`, 'm'),
    );
    expect(listed.stderr).not.toContain('deprecated');

    const retried = await cli('queue', 'retry', id, '--json');
    expect(retried.code).toBe(0);
    expect(retried.stderr).toContain(
      '`requester queue retry` is deprecated; use `requester queue dead retry`',
    );
    expect(JSON.parse(retried.stdout)).toEqual({ retried: 1 });
    expect(await json('queue', 'dead', 'list')).toEqual([]);
    expect(await json('queue', 'info')).toMatchObject({ totals: { pending: 1, dead: 0 } });

    const help = await cli('queue', '--help');
    expect(help.stdout).toContain('queue dead <command>');
    expect(help.stdout).not.toMatch(/queue dlq|queue retry/);
    expect(help.stdout).toContain('dead letters on the DLQ topic (`requester dlq`)');
    await cli('queue', 'purge', '--yes');
  }, 60_000);
});
