import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { registry } from '@requester/shared/metrics';
import { createRedis, Redis, type RedisClient } from '@requester/shared/redis';
import { eventually, freePort, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CallOutcome, createHttpClient } from '../http/index.ts';
import { type CacheFetch, ResponseCache, type ResponseCacheOptions, requestIdentity } from './index.ts';
import { cacheKeys } from './keys.ts';

const REDIS_URL = 'redis://127.0.0.1:6379';
/** The request most tests fetch for: they share a key to share an entry. */
const ONE_REQUEST = requestIdentity({ uri: 'https://x.test/one' });

/** Current value of a cache counter (the registry is per process; tests in a file run in sequence). */
async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const found = registry.getSingleMetric(`requester_cache_${name}_total`);
  const values = found ? (await found.get()).values : [];
  const match = values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return match?.value ?? 0;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function bodyOf(fetch: CacheFetch<CallOutcome>): string | undefined {
  return fetch.outcome.kind === 'response' ? fetch.outcome.body : undefined;
}

interface ChildSummary {
  cached: boolean;
  status: number | string;
  body: string;
}

/** Another process with its own ResponseCache (race-child.fixture.ts), started and connected. */
async function startChild(prefix: string, key: string, uri: string, fetches: number) {
  const script = join(import.meta.dirname, 'race-child.fixture.ts');
  const child = spawn(process.execPath, [script, prefix, key, uri, String(fetches)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  expect((await lines.next()).value).toBe('ready');
  return {
    go: () => child.stdin.write('go\n'),
    results: lines.next().then(({ value }) => JSON.parse(String(value)) as ChildSummary[]),
  };
}

describe('ResponseCache', () => {
  const prefix = `${uniqueName('cache-test')}:`;
  const http = createHttpClient({
    connectTimeoutMs: 5_000,
    responseTimeoutMs: 30_000,
    maxResponseBytes: 1024 * 1024,
    followRedirects: false,
    allowPrivateTargets: ['127.0.0.1'],
  });
  const clients: RedisClient[] = [];
  const caches: ResponseCache[] = [];
  let redis: RedisClient;
  let target: Target;

  /** A cache with its own Redis connection, as another executor process would have. */
  function newCache(options: Partial<ResponseCacheOptions> = {}): ResponseCache {
    const client = options.redis ?? createRedis({ url: REDIS_URL });
    clients.push(client);
    const cache = new ResponseCache({ prefix, waitBudgetMs: 30_000, ...options, redis: client });
    caches.push(cache);
    return cache;
  }

  const callTo =
    (path: string, body = '') =>
    () =>
      http.call({ method: 'POST', uri: `${target.url}${path}`, headers: {}, body });
  const callsTo = (path: string) => target.calls.filter((call) => call.path === path).length;

  beforeAll(async () => {
    target = await startTarget();
    redis = createRedis({ url: REDIS_URL });
  });

  afterAll(async () => {
    await Promise.all(caches.map((cache) => cache.close()));
    await Promise.all(clients.map((client) => client.quit().catch(() => client.disconnect())));
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
    http.close();
    await target.close();
  });

  it('coalesces 50 concurrent misses of one process into one call, then hits until the TTL passes', async () => {
    const cache = newCache();
    const key = uniqueName('k');
    const path = `/echo?k=${key}`;
    const spec = { key, ttl: '2s', request: ONE_REQUEST };
    const results = await Promise.all(
      Array.from({ length: 50 }, () => cache.fetchThrough(spec, callTo(path, 'fx'))),
    );

    expect(callsTo(path)).toBe(1);
    expect(results.map(bodyOf)).toEqual(Array(50).fill('fx'));
    expect(results.filter((r) => !r.cached && !r.shared)).toHaveLength(1);
    expect(results.filter((r) => !r.cached && r.shared)).toHaveLength(49);
    const { value } = cacheKeys(prefix, key);
    const pttl = await redis.pttl(value);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(2_000);

    for (let i = 0; i < 5; i++) {
      const hit = await cache.fetchThrough(spec, callTo(path, 'other'));
      expect(hit).toMatchObject({ cached: true, outcome: { kind: 'response', status: 200, body: 'fx' } });
      expect(hit.outcome.kind === 'response' && hit.outcome.headers['x-target']).toBe('test');
    }
    expect(callsTo(path)).toBe(1);

    await eventually(async () => (await redis.exists(value)) === 0, 5_000, 'entry expired');
    const afterTtl = await cache.fetchThrough(spec, callTo(path, 'fresh'));
    expect(afterTtl).toMatchObject({ cached: false, shared: false });
    expect(bodyOf(afterTtl)).toBe('fresh');
    expect(callsTo(path)).toBe(2);
  });

  it('coalesces across processes: two caches here and two child processes race, one call is made', async () => {
    const key = uniqueName('k');
    // Slow enough that every racer asks while the winner's call is still running.
    const path = `/slow/300?k=${key}`;
    const uri = `${target.url}${path}`;
    const children = await Promise.all([startChild(prefix, key, uri, 10), startChild(prefix, key, uri, 10)]);
    const local = [newCache(), newCache()];
    for (const child of children) child.go();
    const request = requestIdentity({ method: 'GET', uri }); // the children's request
    const here = await Promise.all(
      local.flatMap((cache) =>
        Array.from({ length: 10 }, () => cache.fetchThrough({ key, ttl: '1m', request }, callTo(path))),
      ),
    );
    const there = (await Promise.all(children.map((child) => child.results))).flat();

    expect(callsTo(path)).toBe(1);
    const all = [...here.map((r) => ({ cached: r.cached, body: bodyOf(r) })), ...there];
    expect(all).toHaveLength(40);
    expect(all.every((r) => r.body === 'status 200')).toBe(true);
    // The winner's process shares its call; the three others wait for the value and hit.
    expect(all.filter((r) => !r.cached)).toHaveLength(10);
  });

  it.each([500, 404])('does not store a %i: the next fetch calls again', async (status) => {
    const cache = newCache();
    const key = uniqueName('k');
    const path = `/status/${status}?k=${key}`;
    const spec = { key, ttl: '1m', request: ONE_REQUEST };
    const concurrent = await Promise.all(
      Array.from({ length: 5 }, () => cache.fetchThrough(spec, callTo(path))),
    );
    expect(concurrent.map((r) => r.outcome.kind === 'response' && r.outcome.status)).toEqual(
      Array(5).fill(status),
    );
    expect(concurrent.every((r) => !r.cached)).toBe(true);
    expect(callsTo(path)).toBe(1);

    const next = await cache.fetchThrough(spec, callTo(path));
    expect(next).toMatchObject({ cached: false, shared: false, outcome: { status } });
    expect(callsTo(path)).toBe(2);
    const { value, lock } = cacheKeys(prefix, key);
    expect(await redis.exists(value, lock)).toBe(0);
  });

  it("releases another process's waiters when the winner's call fails: they call the target themselves", async () => {
    const winner = newCache();
    const waiter = newCache();
    const key = uniqueName('k');
    const spec = { key, ttl: '1m', request: ONE_REQUEST };
    const { lock, channel } = cacheKeys(prefix, key);
    const gate = deferred();
    const failed = winner.fetchThrough(spec, async () => {
      await gate.promise;
      return callTo(`/reset?k=${key}`)();
    });
    await eventually(async () => (await redis.exists(lock)) === 1, 5_000, 'winner holds the lock');
    const released = await metric('waits', { outcome: 'winner_failed' });
    const waiting = waiter.fetchThrough(spec, callTo(`/echo?k=${key}`, 'from waiter'));
    await eventually(
      async () => (await redis.pubsub('NUMSUB', channel))[1] === 1,
      5_000,
      'waiter subscribed to the key channel',
    );
    gate.resolve();

    const [lost, own] = await Promise.all([failed, waiting]);
    expect(lost.outcome).toMatchObject({ kind: 'failure', error: { code: 'transport_error' } });
    expect(own).toMatchObject({ cached: false, shared: false });
    expect(bodyOf(own)).toBe('from waiter');
    // Released by the announcement, not by running out its 30 s budget.
    expect(await metric('waits', { outcome: 'winner_failed' })).toBe(released + 1);
    expect(await redis.exists(lock)).toBe(0);
    // The waiter's 2xx was stored.
    expect(await winner.fetchThrough(spec, callTo(`/echo?k=${key}`))).toMatchObject({
      cached: true,
      outcome: { body: 'from waiter' },
    });
  });

  it('passes a thrown error to the fetches sharing the call and frees the lock', async () => {
    const cache = newCache();
    const key = uniqueName('k');
    const spec = { key, ttl: '1m', request: ONE_REQUEST };
    const boom = async (): Promise<CallOutcome> => {
      throw new Error('boom');
    };
    const settled = await Promise.allSettled([1, 2, 3].map(() => cache.fetchThrough(spec, boom)));
    expect(settled.map((s) => s.status === 'rejected' && String(s.reason))).toEqual(
      Array(3).fill('Error: boom'),
    );
    expect(await redis.exists(cacheKeys(prefix, key).lock)).toBe(0);
  });

  it('a waiter whose budget runs out calls the target itself while the slow winner still runs', async () => {
    const winner = newCache();
    const impatient = newCache({ waitBudgetMs: 200 });
    const key = uniqueName('k');
    const spec = { key, ttl: '1m', request: ONE_REQUEST };
    const path = `/echo?k=${key}`;
    const gate = deferred();
    let winnerDone = false;
    const slow = winner
      .fetchThrough(spec, async () => {
        await gate.promise;
        return callTo(path, 'from winner')();
      })
      .finally(() => {
        winnerDone = true;
      });
    await eventually(
      async () => (await redis.exists(cacheKeys(prefix, key).lock)) === 1,
      5_000,
      'lock taken',
    );
    const timeouts = await metric('waits', { outcome: 'timeout' });

    const own = await impatient.fetchThrough(spec, callTo(path, 'from waiter'));
    expect(own).toMatchObject({ cached: false, shared: false });
    expect(bodyOf(own)).toBe('from waiter');
    expect(winnerDone).toBe(false);
    expect(await metric('waits', { outcome: 'timeout' })).toBe(timeouts + 1);

    gate.resolve();
    expect(bodyOf(await slow)).toBe('from winner');
    // Bounded duplicates: one call per process that gave up waiting, plus the winner's.
    expect(callsTo(path)).toBe(2);
  });

  it('a live winner keeps its lock past lockTtlMs: waiters keep waiting and then hit', async () => {
    // The winner renews every third of the lifetime: a lifetime of 1.5 s lets its event loop or
    // Redis stall for a second (a loaded CI box does; 150 ms was lost once) without the lock lapsing.
    const winner = newCache({ lockTtlMs: 1_500 });
    const waiter = newCache({ lockTtlMs: 1_500 });
    const key = uniqueName('k');
    const spec = { key, ttl: '1m', request: ONE_REQUEST };
    const path = `/echo?k=${key}`;
    const gate = deferred();
    const slow = winner.fetchThrough(spec, async () => {
      await gate.promise;
      return callTo(path, 'from winner')();
    });
    await eventually(
      async () => (await redis.exists(cacheKeys(prefix, key).lock)) === 1,
      5_000,
      'lock taken',
    );
    const tookOver = await metric('waits', { outcome: 'took_over' });
    let waiterCalls = 0;
    const waiting = waiter.fetchThrough(spec, () => {
      waiterCalls++;
      return callTo(path, 'from waiter')();
    });
    // Several lock lifetimes pass while the winner's call runs (a wait, not a timing assertion).
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    expect(waiterCalls).toBe(0);

    gate.resolve();
    expect(await waiting).toMatchObject({ cached: true, outcome: { body: 'from winner' } });
    expect((await slow).cached).toBe(false);
    expect(await metric('waits', { outcome: 'took_over' })).toBe(tookOver);
    expect(callsTo(path)).toBe(1);
  });

  it('takes over a lock whose holder died (no announcement) when the lock lapses', async () => {
    const cache = newCache({ lockTtlMs: 300 });
    const key = uniqueName('k');
    const { lock, value } = cacheKeys(prefix, key);
    await redis.set(lock, 'holder-killed', 'PX', 300); // as an executor of an earlier version would
    const tookOver = await metric('waits', { outcome: 'took_over' });

    const result = await cache.fetchThrough(
      { key, ttl: '1m', request: ONE_REQUEST },
      callTo(`/echo?k=${key}`, 'filled'),
    );
    expect(result).toMatchObject({ cached: false, shared: false });
    expect(await metric('waits', { outcome: 'took_over' })).toBe(tookOver + 1);
    expect(await redis.exists(value)).toBe(1);
    expect(await redis.exists(lock)).toBe(0);
  });

  it('passes an answer larger than maxEntryBytes through uncached, and counts it', async () => {
    const cache = newCache({ maxEntryBytes: 100 });
    const key = uniqueName('k');
    const path = `/echo?k=${key}`;
    const skipped = await metric('skipped', { reason: 'oversize' });
    const big = await cache.fetchThrough(
      { key, ttl: '1m', request: ONE_REQUEST },
      callTo(path, 'x'.repeat(200)),
    );
    expect(bodyOf(big)).toBe('x'.repeat(200));
    expect(await metric('skipped', { reason: 'oversize' })).toBe(skipped + 1);
    expect(await redis.exists(cacheKeys(prefix, key).value)).toBe(0);
    await cache.fetchThrough({ key, ttl: '1m', request: ONE_REQUEST }, callTo(path, 'x'.repeat(200)));
    expect(callsTo(path)).toBe(2);
  });

  it('overwrites an unreadable entry instead of serving it', async () => {
    const cache = newCache();
    const key = uniqueName('k');
    await redis.set(cacheKeys(prefix, key).value, 'not json', 'PX', 60_000);
    const first = await cache.fetchThrough(
      { key, ttl: '1m', request: ONE_REQUEST },
      callTo(`/echo?k=${key}`, 'good'),
    );
    expect(first.cached).toBe(false);
    expect(
      await cache.fetchThrough({ key, ttl: '1m', request: ONE_REQUEST }, callTo(`/echo?k=${key}`)),
    ).toMatchObject({
      cached: true,
      outcome: { body: 'good' },
    });
  });

  it('serves an entry only to the request it answered: another request under the key is a miss that stores nothing', async () => {
    const cache = newCache();
    const key = uniqueName('k');
    const mine = requestIdentity({ uri: `${target.url}/echo?who=a` });
    const theirs = requestIdentity({ uri: `${target.url}/echo?who=b` });
    const skipped = await metric('skipped', { reason: 'other_request' });
    await cache.fetchThrough({ key, ttl: '1m', request: mine }, callTo(`/echo?k=${key}&who=a`, 'A'));

    const other = await cache.fetchThrough(
      { key, ttl: '1m', request: theirs },
      callTo(`/echo?k=${key}&who=b`, 'B'),
    );
    expect(other).toMatchObject({ cached: false, shared: false, outcome: { body: 'B' } });
    expect(await metric('skipped', { reason: 'other_request' })).toBe(skipped + 1);
    // The entry still answers its own request, and still only it.
    expect(await cache.fetchThrough({ key, ttl: '1m', request: mine }, callTo('/never'))).toMatchObject({
      cached: true,
      outcome: { body: 'A' },
    });
    const again = await cache.fetchThrough(
      { key, ttl: '1m', request: theirs },
      callTo(`/echo?k=${key}&who=b`, 'B2'),
    );
    expect(again).toMatchObject({ cached: false, outcome: { body: 'B2' } });
    expect(callsTo('/never')).toBe(0);
  });

  it('does not make another request wait for a fill of the key that is not its own', async () => {
    const winner = newCache();
    const other = newCache();
    const key = uniqueName('k');
    const gate = deferred();
    const slow = winner.fetchThrough({ key, ttl: '1m', request: ONE_REQUEST }, async () => {
      await gate.promise;
      return callTo(`/echo?k=${key}&who=winner`, 'winner')();
    });
    await eventually(
      async () => (await redis.exists(cacheKeys(prefix, key).lock)) === 1,
      5_000,
      'lock taken',
    );
    const besides = await metric('waits', { outcome: 'other_request' });
    const request = requestIdentity({ uri: 'https://x.test/another' });
    // Answered while the winner's call is still held: it neither waited nor shared that call.
    const own = await other.fetchThrough(
      { key, ttl: '1m', request },
      callTo(`/echo?k=${key}&who=other`, 'other'),
    );
    expect(own).toMatchObject({ cached: false, shared: false, outcome: { body: 'other' } });
    expect(await metric('waits', { outcome: 'other_request' })).toBe(besides);
    gate.resolve();
    expect(bodyOf(await slow)).toBe('winner');
    expect(
      await winner.fetchThrough({ key, ttl: '1m', request: ONE_REQUEST }, callTo('/never')),
    ).toMatchObject({
      cached: true,
      outcome: { body: 'winner' },
    });
  });

  it('fills an entry of an earlier version (no request recorded) again, as if absent', async () => {
    const cache = newCache();
    const key = uniqueName('k');
    const legacy = JSON.stringify({ status: 200, headers: {}, body: 'written by an earlier version' });
    await redis.set(cacheKeys(prefix, key).value, legacy, 'PX', 60_000);
    const first = await cache.fetchThrough(
      { key, ttl: '1m', request: ONE_REQUEST },
      callTo(`/echo?k=${key}`, 'now'),
    );
    expect(first).toMatchObject({ cached: false, outcome: { body: 'now' } });
    expect(
      await cache.fetchThrough({ key, ttl: '1m', request: ONE_REQUEST }, callTo('/never')),
    ).toMatchObject({
      cached: true,
      outcome: { body: 'now' },
    });
  });

  it('calls the target without the cache when Redis is unreachable (still one call per key)', async () => {
    const down = new Redis({
      host: '127.0.0.1',
      port: await freePort(),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    });
    down.on('error', () => {}); // refused connections are the point of this test
    const cache = newCache({ redis: down });
    const key = uniqueName('k');
    const path = `/echo?k=${key}`;
    const errors = await metric('errors', { op: 'acquire' });
    const results = await Promise.all(
      [1, 2].map(() => cache.fetchThrough({ key, ttl: '1m', request: ONE_REQUEST }, callTo(path, 'direct'))),
    );
    expect(results.map(bodyOf)).toEqual(['direct', 'direct']);
    expect(results.every((r) => !r.cached)).toBe(true);
    expect(callsTo(path)).toBe(1);
    expect(await metric('errors', { op: 'acquire' })).toBe(errors + 1);
  });
});

describe('cache keys', () => {
  const tagOf = (key: string) => key.slice(key.indexOf('{'), key.indexOf('}') + 1);

  it('keep a key, its lock and its channel in one hash tag, under the prefix, whatever the caller key', () => {
    const callerKeys = ['fx-rates-usd', 'a}:lock', '{x}', 'rq:{q:1}:ready', 'v'];
    const all = callerKeys.map((key) => cacheKeys('rq:', key));
    for (const { value, lock, channel } of all) {
      expect(value.startsWith('rq:cache:{c:')).toBe(true);
      expect(tagOf(lock)).toBe(tagOf(value));
      expect(tagOf(channel)).toBe(tagOf(value));
    }
    const names = all.flatMap(({ value, lock, channel }) => [value, lock, channel]);
    expect(new Set(names).size).toBe(names.length);
  });
});

describe('requestIdentity', () => {
  const base = {
    method: 'POST',
    uri: 'https://api.partner.example/fx?token=A',
    headers: { 'x-owner': 'A-SECRET', accept: 'application/json' },
    body: '{"ccy":"USD"}',
  };

  it('is the same for the same request, whatever the header names’ case and order', () => {
    const same = { ...base, method: 'post', headers: { Accept: 'application/json', 'X-Owner': 'A-SECRET' } };
    expect(requestIdentity(same)).toBe(requestIdentity(base));
    expect(requestIdentity({ uri: base.uri })).toBe(
      requestIdentity({ uri: base.uri, method: 'GET', headers: {} }),
    );
  });

  it('differs with the method, the URL (its query too), the body or any header the caller set', () => {
    const others = [
      { ...base, method: 'PUT' },
      { ...base, uri: 'https://api.partner.example/fx?token=B' },
      { ...base, uri: 'https://other.example/fx?token=A' },
      { ...base, body: '{"ccy":"EUR"}' },
      { ...base, headers: { ...base.headers, 'x-owner': 'B-SECRET' } },
      { ...base, headers: { accept: 'application/json' } },
    ];
    const identities = new Set([base, ...others].map(requestIdentity));
    expect(identities.size).toBe(others.length + 1);
    for (const identity of identities) expect(identity).toMatch(/^[\w-]{43}$/);
  });
});
