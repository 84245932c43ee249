import { createHash, randomBytes } from 'node:crypto';
import { type ConfigOverrides, loadConfig } from '@requester/shared/config';
import { buildResult, clientScoped, type RequestEnvelope } from '@requester/shared/contract';
import { CredentialStore, parseMasterKeys } from '@requester/shared/credentials';
import { createPg } from '@requester/shared/pg';
import { Dependencies } from '@requester/shared/role';
import { capturingLogger, eventually, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROKERS, closeProducer, reader, send, silent, topics } from '../../test/kit.fixture.ts';
import { createApi } from '../api/index.ts';
import { hashSecret, type KeyRecord, type KeyScopes, KeyStore } from '../keys/index.ts';
import { ingressRole, syncGatewayRole } from '../roles/index.ts';
import { KeyAccess } from './index.ts';

const database = uniqueName('auth').replaceAll('-', '_');
const DATABASE_URL = `postgres://postgres@127.0.0.1:5432/${database}`;

interface Stack {
  url: string;
  topics: { in: string; out: string };
  keys: KeyStore;
  stop(): Promise<void>;
}

/** ingress + sync-gateway with AUTH on (the default), on fresh topics and their own database. */
async function startStack(overrides: ConfigOverrides = {}): Promise<Stack> {
  const t = await topics(1); // one partition: what reaches `in` is read in the order it was written
  const config = loadConfig(
    {},
    {
      kafkaBrokers: BROKERS,
      topicIn: t.in,
      topicOut: t.out,
      createTopics: 'false',
      httpPort: '0',
      databaseUrl: DATABASE_URL,
      redisPrefix: uniqueName('auth'),
      syncTimeout: '3s',
      ...overrides,
    },
  );
  const deps = new Dependencies(config, silent);
  const ctx = { config, logger: silent, deps };
  const ingress = await ingressRole.start(ctx);
  const gateway = await syncGatewayRole.start(ctx);
  return {
    url: ingress.url,
    topics: t,
    keys: new KeyStore(await deps.sql()),
    async stop() {
      await Promise.all([ingress.stopAccepting?.(), gateway.stopAccepting?.()]);
      await Promise.all([ingress.drain(), gateway.drain()]);
      await deps.close();
    },
  };
}

const post = (url: string, body: unknown, token?: string) =>
  fetch(`${url}/request`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
const get = (url: string, path: string, token: string) =>
  fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });

const call = (requestId: string, uri = 'https://api.partner.example/x', meta: object = {}) => ({
  request: { uri },
  meta: { requestId, ...meta },
});

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ authCacheTtl: '1s' });
}, 60_000);
afterAll(async () => {
  await stack?.stop();
  await closeProducer();
  const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
  await admin.unsafe(`drop database if exists "${database}" with (force)`).catch(() => {});
  await admin.end({ timeout: 5 });
});

describe('API keys at the door', () => {
  it('answers 401 problem+json without a key, with a wrong one, and with a revoked one (within AUTH_CACHE_TTL)', async () => {
    const none = await post(stack.url, call('a-1'));
    expect(none.status).toBe(401);
    expect(none.headers.get('content-type')).toBe('application/problem+json');
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(await none.json()).toMatchObject({ status: 401, code: 'unauthorized' });

    const { token, id } = await stack.keys.create({ name: uniqueName('k') });
    const wrongSecret = token.replace(/.$/, (last) => (last === 'A' ? 'B' : 'A'));
    for (const bad of ['nonsense', wrongSecret, `rqk_ffffffffffff_${'a'.repeat(43)}`]) {
      const res = await post(stack.url, call('a-2'), bad);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ code: 'unauthorized' });
    }
    expect((await get(stack.url, '/requests/a-2', wrongSecret)).status).toBe(401);

    expect((await post(stack.url, call('a-3'), token)).status).toBe(202);
    await stack.keys.revoke(id);
    // AUTH_CACHE_TTL is 1s here: the revocation must have taken effect after it (margin for a busy machine).
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const revoked = await post(stack.url, call('a-4'), token);
    expect(revoked.status).toBe(401);
  });

  it('refuses a host outside the key scope with 403 before anything reaches in', async () => {
    const { token } = await stack.keys.create({ name: uniqueName('k'), hosts: ['*.partner.example'] });
    const seen = await reader(stack.topics.in);
    try {
      const refused = await post(stack.url, call('h-1', 'https://api.other.example/x'), token);
      expect(refused.status).toBe(403);
      expect(await refused.json()).toMatchObject({
        code: 'forbidden',
        issues: [{ path: 'request.uri', message: expect.stringContaining('api.other.example') }],
      });
      // The apex is not under *.partner.example either.
      expect((await post(stack.url, call('h-2', 'https://partner.example/'), token)).status).toBe(403);
      expect((await post(stack.url, call('h-3', 'https://a.b.partner.example/'), token)).status).toBe(202);
      const before: string[] = [];
      for (let record = await seen.next(); record.key !== 'h-3'; record = await seen.next())
        before.push(record.key ?? '');
      expect(before).not.toContain('h-1'); // the refused ones were never produced
      expect(before).not.toContain('h-2');
    } finally {
      await seen.close();
    }
  });

  it('checks the sync, schedule and body-size scopes, and refuses a caller-sent meta.client', async () => {
    const name = uniqueName('k');
    const { token } = await stack.keys.create({ name, maxBodyBytes: 300 });
    const sync = await post(stack.url, call('s-1', undefined, { sync: true }), token);
    expect(sync.status).toBe(403);
    expect(await sync.json()).toMatchObject({ issues: [{ path: 'meta.sync' }] });

    const farAway = new Date(Date.now() + 3_600_000).toISOString();
    const far = await post(stack.url, call('s-2', undefined, { scheduled: farAway }), token);
    expect(far.status).toBe(403);
    expect(await far.json()).toMatchObject({ issues: [{ path: 'meta.scheduled' }] });
    const soon = new Date(Date.now() + 200).toISOString(); // within REDIS_HORIZON (1s)
    expect((await post(stack.url, call('s-3', undefined, { scheduled: soon }), token)).status).toBe(202);

    const big = await post(stack.url, call('s-4', undefined, { proxyData: 'x'.repeat(400) }), token);
    expect(big.status).toBe(413);

    const spoofed = await post(stack.url, call('s-5', undefined, { client: 'someone-else' }), token);
    expect(spoofed.status).toBe(400);
    expect(await spoofed.json()).toMatchObject({ issues: [{ path: 'meta.client' }] });

    const { token: scheduler } = await stack.keys.create({ name: uniqueName('k'), schedule: true });
    expect((await post(stack.url, call('s-6', undefined, { scheduled: farAway }), scheduler)).status).toBe(
      202,
    );

    // A monthly quota holds a call until its reset: a parking only the schedule scope allows.
    const quota = {
      limiter: { key: 'partner', algorithm: 'token-bucket', quota: { value: 10, period: 'month' } },
    };
    const monthly = await post(stack.url, call('s-7', undefined, quota), token);
    expect(monthly.status).toBe(403);
    expect(await monthly.json()).toMatchObject({ issues: [{ path: 'meta.limiter.quota' }] });
    expect((await post(stack.url, call('s-8', undefined, quota), scheduler)).status).toBe(202);

    // A debounce delay beyond the horizon parks the burst's requests as long.
    const debounce = { debounce: { key: 'profile', delay: '5s' } };
    const debounced = await post(stack.url, call('s-9', undefined, debounce), token);
    expect(debounced.status).toBe(403);
    expect(await debounced.json()).toMatchObject({ issues: [{ path: 'meta.debounce.delay' }] });
    expect((await post(stack.url, call('s-10', undefined, debounce), scheduler)).status).toBe(202);
  });

  it('answers 429 with an honest Retry-After above the key rate: waiting that long is enough', async () => {
    const { token } = await stack.keys.create({ name: uniqueName('k'), rate: '1/2s' });
    expect((await post(stack.url, call('r-1'), token)).status).toBe(202);
    const limited = await post(stack.url, call('r-2'), token);
    expect(limited.status).toBe(429);
    expect(await limited.json()).toMatchObject({ code: 'rate_limited' });
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(2);
    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
    expect((await post(stack.url, call('r-3'), token)).status).toBe(202);
  });
});

describe('targets: host ports, Host headers and credential origins', () => {
  it('--hosts takes host:port (a plain host still means any port)', async () => {
    const { token } = await stack.keys.create({
      name: uniqueName('k'),
      hosts: ['127.0.0.1:8081', 'api.partner.example', '*.hooks.example:443'],
    });
    const status = async (id: string, uri: string) => (await post(stack.url, call(id, uri), token)).status;
    expect(await status('p-1', 'http://127.0.0.1:8081/x')).toBe(202);
    // The probe's listener: same host, another port.
    const other = await post(stack.url, call('p-2', 'http://127.0.0.1:18601/hello'), token);
    expect(other.status).toBe(403);
    expect(await other.json()).toMatchObject({
      code: 'forbidden',
      issues: [{ path: 'request.uri', message: expect.stringContaining('port 18601') }],
    });
    expect(await status('p-3', 'https://api.partner.example:8443/x')).toBe(202);
    expect(await status('p-4', 'https://a.hooks.example/x')).toBe(202);
    expect(await status('p-5', 'http://a.hooks.example/x')).toBe(403);
    await expect(stack.keys.create({ name: uniqueName('k'), hosts: ['x.example:99999'] })).rejects.toThrow(
      /optional :port/,
    );
  });

  it('refuses a Host header naming another host than the URI’s (400) unless the key allows virtual hosts', async () => {
    const plain = await stack.keys.create({ name: uniqueName('k'), hosts: ['127.0.0.1'] });
    const hosted = (id: string, host: string) => ({
      request: { uri: 'http://127.0.0.1:18601/hello', headers: { Host: host } },
      meta: { requestId: id },
    });
    const evil = await post(stack.url, hosted('v-1', 'evil.example'), plain.token);
    expect(evil.status).toBe(400);
    expect(await evil.json()).toMatchObject({
      code: 'invalid_request',
      issues: [{ path: 'request.headers.host' }],
    });
    expect((await post(stack.url, hosted('v-2', '127.0.0.1:18601'), plain.token)).status).toBe(202);
    expect((await post(stack.url, hosted('v-3', '127.0.0.1:9999'), plain.token)).status).toBe(400);
    const vhosts = await stack.keys.create({
      name: uniqueName('k'),
      hosts: ['127.0.0.1'],
      virtualHosts: true,
    });
    expect((await post(stack.url, hosted('v-4', 'evil.example'), vhosts.token)).status).toBe(202);
  });

  it('refuses a credential (or signing key) for another origin than its own with 403 credential_origin_refused', async () => {
    const own = await startStack({ authCacheTtl: '1s', credentialsCacheTtl: '100ms' });
    const sql = createPg({ url: DATABASE_URL, max: 1 });
    try {
      const store = new CredentialStore(sql, parseMasterKeys(`t:${randomBytes(32).toString('base64')}`));
      const oauth2 = {
        tokenUrl: 'https://auth.partner.example/token',
        clientId: 'c',
        clientSecret: 's-0123',
      };
      await store.create('partner-pay', { oauth2 }, 'https://api.partner.example');
      await store.create(
        'partner-sign',
        { signing: `whsec_${randomBytes(24).toString('base64')}` },
        'https://hooks.partner.example',
      );
      await store.create('older', { oauth2 }, null);
      const { token } = await own.keys.create({
        name: uniqueName('k'),
        hosts: ['127.0.0.1', 'api.partner.example', 'hooks.partner.example'],
        credentials: ['partner-pay', 'partner-sign', 'older'],
      });
      const send = (id: string, uri: string, meta: object, headers?: Record<string, string>) =>
        post(
          own.url,
          { request: { uri, ...(headers ? { headers } : {}) }, meta: { requestId: id, ...meta } },
          token,
        );
      // The attack: the key may call 127.0.0.1 and use partner-pay, so it names it for its own listener.
      const stolen = await send('c-1', 'http://127.0.0.1:18601/hello', { credentials: 'partner-pay' });
      expect(stolen.status).toBe(403);
      expect(await stolen.json()).toMatchObject({
        code: 'credential_origin_refused',
        issues: [
          {
            path: 'meta.credentials',
            message: expect.stringContaining('may not be sent to http://127.0.0.1:18601'),
          },
        ],
      });
      expect(
        (await send('c-2', 'https://api.partner.example/pay', { credentials: 'partner-pay' })).status,
      ).toBe(202);
      expect(
        (await send('c-3', 'http://api.partner.example/pay', { credentials: 'partner-pay' })).status,
      ).toBe(403);
      // A signing oracle no more: the key's signing credential signs only for its own origin.
      const oracle = await send('c-4', 'http://127.0.0.1:18601/sign-me', {
        signing: { keyId: 'partner-sign' },
      });
      expect(oracle.status).toBe(403);
      expect(await oracle.json()).toMatchObject({
        code: 'credential_origin_refused',
        issues: [{ path: 'meta.signing.keyId' }],
      });
      expect(
        (await send('c-5', 'https://hooks.partner.example/in', { signing: { keyId: 'partner-sign' } }))
          .status,
      ).toBe(202);
      // Created before origins existed: refused until an operator names them.
      const older = await send('c-6', 'https://api.partner.example/pay', { credentials: 'older' });
      expect(older.status).toBe(403);
      expect(JSON.stringify(await older.json())).toContain('set-origins older');
      await store.setOrigins('older', 'https://api.partner.example');
      await eventually(
        async () =>
          (await send(`c-7-${Date.now()}`, 'https://api.partner.example/pay', { credentials: 'older' }))
            .status === 202,
        10_000,
        'the origins named',
      );
    } finally {
      await sql.end({ timeout: 5 });
      await own.stop();
    }
  });
});

describe('results only for their owner', () => {
  it("answers key A's result to A (sync and long-poll) and to B as if it did not exist", async () => {
    const scopes: Partial<KeyScopes> = { sync: true };
    const a = await stack.keys.create({ name: uniqueName('a'), ...scopes });
    const b = await stack.keys.create({ name: uniqueName('b'), ...scopes });
    // Plays the executor: answers each request on `in` with a result carrying its meta.client,
    // once per client's requestId (the router's dedup refuses a replayed one).
    const seen = await reader(stack.topics.in);
    const answered = new Set<string>();
    const answering = (async () => {
      for (;;) {
        const record = await seen.next(30_000).catch(() => undefined);
        if (!record) return;
        const envelope = JSON.parse(record.value) as RequestEnvelope;
        const request = clientScoped(envelope.meta.client, envelope.meta.requestId);
        if (answered.has(request)) continue;
        answered.add(request);
        const result = buildResult({
          requestId: envelope.meta.requestId,
          status: 200,
          body: envelope.meta.client === a.name ? 'secret' : 'their own',
          tryCount: 1,
        });
        await send(stack.topics.out, envelope.meta.requestId, {
          ...result,
          meta: { ...result.meta, client: envelope.meta.client },
        });
      }
    })();
    try {
      const id = uniqueName('owned');
      const mine = await post(stack.url, call(id, undefined, { sync: true }), a.token);
      expect(mine.status).toBe(200);
      expect(await mine.json()).toMatchObject({ response: { body: 'secret' }, meta: { client: a.name } });

      const polled = await get(stack.url, `/requests/${id}?wait=1s`, b.token);
      expect(polled.status).toBe(404);
      expect(await polled.json()).toMatchObject({ requestId: id, status: 'pending' });
      // B re-using A's requestId: requestIds are per client, so it is B's own request, answered
      // with B's own result; nothing tells B that A used the id.
      const reused = await post(stack.url, call(id, undefined, { sync: true }), b.token);
      expect(reused.status).toBe(200);
      const theirs = await reused.text();
      expect(JSON.parse(theirs)).toMatchObject({ response: { body: 'their own' }, meta: { client: b.name } });
      expect(theirs).not.toContain('secret');
      expect(theirs).not.toContain(a.name);

      const again = await get(stack.url, `/requests/${id}`, a.token);
      expect(again.status).toBe(200);
      expect(await again.json()).toMatchObject({ response: { body: 'secret' }, meta: { client: a.name } });
    } finally {
      await seen.close();
      await answering;
    }
  }, 60_000);
});

describe('KeyAccess cache', () => {
  const record = (revoked: boolean): KeyRecord => ({
    id: '0123456789ab',
    name: 'billing',
    secretHash: Buffer.alloc(32),
    sync: false,
    schedule: false,
    kafkaEntry: false,
    createdAt: new Date(0),
    ...(revoked ? { revokedAt: new Date(0) } : {}),
  });

  it('reads a key once per TTL, concurrent calls included; a revocation counts from the next read', async () => {
    let now = 0;
    let revoked = false;
    let reads = 0;
    const access = new KeyAccess({
      find: async () => {
        reads++;
        return record(revoked);
      },
      cacheTtlMs: 5_000,
      horizonMs: 1_000,
      limiter: () => {
        throw new Error('no rate here');
      },
      now: () => now,
    });
    const token = `Bearer rqk_0123456789ab_${'a'.repeat(43)}`;
    // The secret does not match the all-zero hash: every answer is a 401, but the reads are what counts.
    await Promise.all([access.identify(token), access.identify(token), access.identify(token)]);
    expect(reads).toBe(1);
    revoked = true;
    now = 4_999;
    await access.identify(token);
    expect(reads).toBe(1);
    now = 5_000;
    await access.identify(token);
    expect(reads).toBe(2);
  });

  it("takes a rotated key's new token at once, old one within its grace; a wrong secret repeated costs no read", async () => {
    const [oldSecret, newSecret, wrongSecret] = ['a', 'b', 'c'].map((c) => c.repeat(43)) as [
      string,
      string,
      string,
    ];
    const bearer = (secret: string) => `Bearer rqk_0123456789ab_${secret}`;
    let stored: KeyRecord = { ...record(false), secretHash: hashSecret(oldSecret) };
    let reads = 0;
    const access = new KeyAccess({
      find: async () => {
        reads++;
        return stored;
      },
      cacheTtlMs: 3_600_000,
      horizonMs: 1_000,
      limiter: () => {
        throw new Error('no rate here');
      },
    });
    expect(await access.identify(bearer(oldSecret))).toMatchObject({ name: 'billing' });
    // keys rotate --grace 1h, as KeyStore.rotate writes it
    stored = {
      ...stored,
      secretHash: hashSecret(newSecret),
      previousHash: hashSecret(oldSecret),
      previousExpiresAt: new Date(Date.now() + 3_600_000),
    };
    expect(await access.identify(bearer(newSecret))).toMatchObject({ name: 'billing' });
    expect(await access.identify(bearer(oldSecret))).toMatchObject({ name: 'billing' });
    expect(reads).toBe(2);
    for (let i = 0; i < 3; i++)
      expect(await access.identify(bearer(wrongSecret))).toMatchObject({ status: 401 });
    expect(reads).toBe(3);
  });

  it('warns at start when AUTH=off', async () => {
    const { logger, lines } = capturingLogger('warn');
    const { accessFromConfig } = await import('./index.ts');
    const config = loadConfig({}, { auth: 'off' });
    await accessFromConfig({ config, logger, deps: new Dependencies(config, logger) });
    expect(lines).toEqual([expect.objectContaining({ msg: expect.stringContaining('AUTH=off') })]);
  });
});

describe('logs', () => {
  it('name the client on every line of an accepted request and never carry the key', async () => {
    const secret = 'S'.repeat(43);
    const record: KeyRecord = {
      id: 'abcdefabcdef',
      name: 'billing',
      secretHash: createHash('sha256').update(secret).digest(),
      sync: false,
      schedule: false,
      kafkaEntry: false,
      createdAt: new Date(0),
    };
    const access = new KeyAccess({
      find: async (id) => (id === record.id ? record : undefined),
      cacheTtlMs: 1_000,
      horizonMs: 1_000,
      limiter: () => {
        throw new Error('no rate here');
      },
    });
    const { logger, lines } = capturingLogger('debug');
    const written: string[] = [];
    const app = createApi(
      {
        submit: async (_key, value) => void written.push(value),
        ingressLog: logger.child({ role: 'ingress' }),
      },
      { maxBodyBytes: 10_000, syncTimeoutMs: 1_000, longPollMaxMs: 1_000, access },
      logger,
    );
    const send = (token: string) =>
      app.request('/request', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify(call('log-1')),
      });
    expect((await send(`rqk_${record.id}_${secret}`)).status).toBe(202);
    expect((await send(`rqk_${record.id}_${'T'.repeat(43)}`)).status).toBe(401);
    expect(lines.find((l) => l.status === 202)).toMatchObject({ client: 'billing', requestId: 'log-1' });
    expect(JSON.parse(written[0]!).meta.client).toBe('billing');
    const everything = JSON.stringify(lines) + written.join('');
    expect(everything).not.toContain(secret);
    expect(everything).not.toContain('T'.repeat(43));
  });
});
