import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CredentialStore, parseMasterKeys } from '@requester/shared/credentials';
import { registry } from '@requester/shared/metrics';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import {
  eventually,
  makeTestPki,
  type ProtectedTarget,
  startConnectProxy,
  startProtectedTarget,
  startTarget,
  startTokenEndpoint,
  type Target,
  type TestPki,
  type TestProxy,
  type TokenEndpoint,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import {
  type CallOutcome,
  createHttpClient,
  type HttpClient,
  type HttpClientSettings,
} from '../http/index.ts';
import { withCredentials } from './index.ts';

const REDIS_URL = 'redis://127.0.0.1:6379';
const CLIENT = { id: 'requester-billing', secret: `cs-${randomBytes(16).toString('hex')}` };
const MASTER = parseMasterKeys(`m1:${randomBytes(32).toString('base64')}`);

const base: HttpClientSettings = {
  connectTimeoutMs: 5000,
  responseTimeoutMs: 5000,
  maxResponseBytes: 1 << 20,
  followRedirects: false,
  allowPrivateTargets: ['127.0.0.1'],
};

/** `count` calls, at most `workers` at a time on each executor (as MAX_WORKERS bounds an executor). */
async function spread<T>(count: number, workers: number, run: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) results[i] = await run(i);
  };
  await Promise.all(Array.from({ length: workers }, worker));
  return results;
}

/** The origin a credential is bound to for a test server's URL. */
const originOf = (url: string) => new URL(url).origin;

const statusOf = (o: CallOutcome) => (o.kind === 'response' ? o.status : o.error.code);
const failureOf = (o: CallOutcome) =>
  o.kind === 'response' ? String(o.status) : `${o.error.code}: ${o.error.message}`;

describe('calls with named credentials (real token endpoint, Redis, PostgreSQL)', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  let store: CredentialStore;
  let redis: RedisClient;
  let prefix: string;
  let tokens: TokenEndpoint;
  let target: ProtectedTarget;
  const clients: HttpClient[] = [];

  /** An "executor": its own HTTP client, token source and caches; Redis and the store shared. */
  function executor(
    settings: Partial<HttpClientSettings> = {},
    timeoutMs = 10_000,
    connection = redis,
  ): HttpClient {
    const client = withCredentials(createHttpClient({ ...base, ...settings }), {
      store,
      cacheTtlMs: 100,
      redis: connection,
      prefix,
      timeoutMs,
    });
    clients.push(client);
    return client;
  }
  const call = (client: HttpClient, credentials: string, uri = target.url) =>
    client.call({ method: 'GET', uri, headers: { authorization: 'Bearer caller-own' }, credentials });

  beforeAll(async () => {
    pg = await testPg();
    store = new CredentialStore(pg.sql, MASTER);
    redis = createRedis({ url: REDIS_URL });
    prefix = uniqueName('cred');
    tokens = await startTokenEndpoint(CLIENT);
    target = await startProtectedTarget({ tokens });
    const oauth2 = { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret, scope: 'pay' };
    await store.create('partner', { oauth2 }, originOf(target.url));
    await store.create(
      'partner-post',
      { oauth2: { ...oauth2, authMethod: 'client_secret_post', audience: 'api' } },
      originOf(target.url),
    );
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await Promise.all([tokens.close(), target.close()]);
    redis.disconnect();
    await pg.drop();
  });

  it('1,000 calls on 2 executors make one token request per token lifetime', async () => {
    const [a, b] = [executor(), executor()];
    const outcomes = await spread(1000, 100, (i) => call(i % 2 ? a : b, 'partner'));
    // A failure shows its message, not only its code.
    expect(outcomes.filter((o) => statusOf(o) !== 200).map(failureOf)).toEqual([]);
    expect(tokens.requests).toHaveLength(1);
    expect(tokens.requests[0]).toMatchObject({
      method: 'basic',
      clientId: CLIENT.id,
      form: { scope: 'pay' },
    });
    // The token server-side dies (revoked, expired early): each executor's first 401 refreshes it,
    // once for both, and the call is made again.
    tokens.expireAll();
    const again = await spread(1000, 100, (i) => call(i % 2 ? a : b, 'partner'));
    expect(again.map(statusOf).filter((s) => s !== 200)).toEqual([]);
    expect(tokens.requests).toHaveLength(2);
    expect(target.ok).toBe(2000);
  });

  it('eight executors racing for a new token ask the endpoint once, round after round', async () => {
    // The check for a cached token and the fetch lock are one script: a waiter that read "no
    // token" just before the holder stored it and freed the lock must not fetch a second one.
    // Each executor has a Redis connection of its own, as processes do: on one shared connection
    // the replies come in order and hide the race.
    const connections = Array.from({ length: 8 }, () => createRedis({ url: REDIS_URL }));
    onTestFinished(() => {
      for (const c of connections) c.disconnect();
    });
    const executors = connections.map((c) => executor({}, 10_000, c));
    const oauth2 = { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret };
    for (let round = 0; round < 60; round++) {
      const name = `race-${round}`;
      await store.create(name, { oauth2 }, originOf(target.url));
      const before = tokens.requests.length;
      const outcomes = await Promise.all(
        executors.flatMap((e) => Array.from({ length: 4 }, () => call(e, name))),
      );
      expect(outcomes.filter((o) => statusOf(o) !== 200).map(failureOf)).toEqual([]);
      expect(tokens.requests.length - before, `round ${round}`).toBe(1);
    }
  });

  it('a token is asked for again once its lifetime (less a margin) is over, and only then', async () => {
    tokens.lifetimeS = 2;
    const [a, b] = [executor(), executor()];
    await store.rotate('partner', {
      oauth2: { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret },
    });
    const before = tokens.requests.length;
    await eventually(
      async () => statusOf(await call(a, 'partner')) === 200,
      5000,
      'the rotated credential in use',
    );
    expect(tokens.requests.length).toBe(before + 1);
    const tokenKey = `${prefix}:cred:{partner}:2:token`;
    expect(await redis.pttl(tokenKey)).toBeGreaterThan(0);
    await eventually(async () => (await redis.exists(tokenKey)) === 0, 10_000, 'the token expires');
    const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => call(i % 2 ? a : b, 'partner')));
    expect(outcomes.map(statusOf).filter((s) => s !== 200)).toEqual([]);
    expect(tokens.requests.length).toBe(before + 2);
    tokens.lifetimeS = 3600;
  });

  it('authenticates with client_secret_post, sending audience', async () => {
    expect(statusOf(await call(executor(), 'partner-post'))).toBe(200);
    expect(tokens.requests.at(-1)).toMatchObject({
      method: 'post',
      clientId: CLIENT.id,
      clientSecret: CLIENT.secret,
      form: { grant_type: 'client_credentials', audience: 'api' },
    });
  });

  it('a failing token endpoint fails the attempt with credential_unavailable, asked once for many calls', async () => {
    const oauth2 = { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret };
    await store.create('failing', { oauth2 }, originOf(target.url));
    tokens.failWith = 503;
    const before = tokens.requests.length;
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => call(executor(), 'failing')));
    tokens.failWith = undefined;
    for (const o of outcomes) {
      expect(o.kind === 'failure' && o.error.code).toBe('credential_unavailable');
      expect(o.kind === 'failure' && o.error.message).not.toContain(CLIENT.secret);
    }
    expect(outcomes[0]?.kind === 'failure' && outcomes[0].error.message).toMatch(
      /token endpoint http:\/\/127\.0\.0\.1:\d+\/oauth\/token answered 503 \(temporarily_unavailable\)/,
    );
    expect(tokens.requests.length).toBe(before + 1);
  });

  it('a token endpoint that hangs fails the attempt within OAUTH2_TOKEN_TIMEOUT', async () => {
    const oauth2 = { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret };
    await store.create('hanging', { oauth2 }, originOf(target.url));
    tokens.hang = true;
    const outcome = await call(executor({}, 300), 'hanging');
    tokens.hang = false;
    expect(outcome.kind === 'failure' && outcome.error.code).toBe('credential_unavailable');
    expect(outcome.kind === 'failure' && outcome.error.message).toMatch(/did not answer within 300 ms/);
  });

  it('a wrong client secret is a clear failure naming the OAuth2 error, not the secret', async () => {
    await store.create(
      'wrong-secret',
      { oauth2: { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: 'not-the-secret' } },
      originOf(target.url),
    );
    const outcome = await call(executor(), 'wrong-secret');
    expect(outcome.kind === 'failure' && outcome.error.message).toMatch(/answered 401 \(invalid_client\)/);
    expect(outcome.kind === 'failure' && outcome.error.message).not.toContain('not-the-secret');
  });

  it('refuses a revoked credential and an unknown one with their own codes', async () => {
    const client = executor();
    await store.create(
      'short-lived',
      { oauth2: { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret } },
      originOf(target.url),
    );
    expect(statusOf(await call(client, 'short-lived'))).toBe(200);
    await store.revoke('short-lived');
    await eventually(
      async () => statusOf(await call(client, 'short-lived')) === 'credential_revoked',
      5000,
      'revoked',
    );
    expect(statusOf(await call(client, 'no-such-credential'))).toBe('credential_unknown');
  });

  it('sends the token only to the credential’s origins: another port of the same host, a foreign Host header, a redirect get nothing', async () => {
    // The attack: a key allowed the host 127.0.0.1 names the credential for a listener it runs.
    const stealer: Target = await startTarget();
    const redirector: Server = createServer((_req, res) => {
      res.writeHead(302, { location: `${stealer.url}/collect` }).end();
    });
    await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
    const redirectorUrl = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}`;
    try {
      const client = executor({ followRedirects: true });
      const elsewhere = await call(client, 'partner', `${stealer.url}/hello`);
      expect(elsewhere.kind === 'failure' && elsewhere.error.code).toBe('credential_origin_refused');
      expect(elsewhere.kind === 'failure' && elsewhere.error.message).toContain(
        `may not be sent to ${originOf(stealer.url)} (its origins: ${originOf(target.url)})`,
      );
      // The right address, but a Host header asking the server to route it to another name.
      const vhost = await client.call({
        method: 'GET',
        uri: target.url,
        headers: { Host: 'evil.example' },
        credentials: 'partner',
      });
      expect(vhost.kind === 'failure' && vhost.error.code).toBe('credential_origin_refused');
      // A Host header naming the URI's own host is fine.
      const own = await client.call({
        method: 'GET',
        uri: target.url,
        headers: { host: new URL(target.url).host },
        credentials: 'partner',
      });
      expect(statusOf(own)).toBe(200);
      // A redirect is the result of a call with a credential, even with TARGET_FOLLOW_REDIRECTS=true.
      await store.setOrigins('partner', [originOf(target.url), redirectorUrl]);
      await eventually(
        async () => statusOf(await call(client, 'partner', `${redirectorUrl}/start`)) === 302,
        5000,
        'the redirect as the result',
      );
      expect(stealer.calls).toEqual([]);
      // Without a credential the same redirect is followed (the setting still holds for the others).
      const plain = await client.call({ method: 'GET', uri: `${redirectorUrl}/start`, headers: {} });
      expect(statusOf(plain)).toBe(200);
      expect(stealer.calls.map((c) => [c.path, c.headers.authorization])).toEqual([['/collect', undefined]]);
    } finally {
      await store.setOrigins('partner', originOf(target.url));
      await stealer.close();
      await new Promise((resolve) => redirector.close(resolve));
    }
  });

  it('a credential written before origins existed is refused until an operator names them', async () => {
    const client = executor();
    await store.create(
      'from-before',
      { oauth2: { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret } },
      null,
    );
    const refused = await call(client, 'from-before');
    expect(refused.kind === 'failure' && refused.error.code).toBe('credential_origin_refused');
    expect(refused.kind === 'failure' && refused.error.message).toContain(
      'requester credentials set-origins from-before',
    );
    await store.setOrigins('from-before', originOf(target.url));
    await eventually(async () => statusOf(await call(client, 'from-before')) === 200, 5000, 'origins named');
  });

  it('keeps secrets and tokens out of Redis in the clear and out of the metrics', async () => {
    const keys = await redis.keys(`${prefix}:*`);
    const values = await Promise.all(keys.map((k) => redis.get(k).catch(() => '')));
    const dump = values.join('\n');
    expect(dump).not.toContain(CLIENT.secret);
    expect(dump).not.toMatch(/at-[0-9a-f]{32}/);
    const metrics = await registry.metrics();
    expect(metrics).not.toContain(CLIENT.secret);
    expect(metrics).toMatch(/requester_credential_token_fetches_total\{outcome="ok"\} \d+/);
  });
});

describe('mTLS and the egress proxy (real TLS target, real proxy)', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  let store: CredentialStore;
  let redis: RedisClient;
  let pki: TestPki;
  let tlsTarget: ProtectedTarget;
  let plainTarget: ProtectedTarget;
  let proxy: TestProxy;
  const clients: HttpClient[] = [];

  function executor(settings: Partial<HttpClientSettings> = {}): HttpClient {
    const client = withCredentials(createHttpClient({ ...base, ...settings }), {
      store,
      cacheTtlMs: 100,
      redis,
      prefix: uniqueName('cred'),
      timeoutMs: 5000,
    });
    clients.push(client);
    return client;
  }
  const get = (client: HttpClient, uri: string, credentials?: string) =>
    client.call({ method: 'GET', uri, headers: {}, ...(credentials ? { credentials } : {}) });

  beforeAll(async () => {
    pg = await testPg();
    store = new CredentialStore(pg.sql, MASTER);
    redis = createRedis({ url: REDIS_URL });
    pki = makeTestPki();
    tlsTarget = await startProtectedTarget({
      tls: { cert: pki.serverCert, key: pki.serverKey, ca: pki.caCert },
    });
    plainTarget = await startProtectedTarget({});
    proxy = await startConnectProxy();
    // Also the target's `localhost` spelling: the SSRF guard's test below reaches it by that name.
    const tlsOrigins = [originOf(tlsTarget.url), originOf(tlsTarget.url.replace('127.0.0.1', 'localhost'))];
    await store.create(
      'client-cert',
      { mtls: { cert: pki.clientCert, key: pki.clientKey, ca: pki.caCert } },
      tlsOrigins,
    );
    await store.create(
      'stranger-cert',
      { mtls: { cert: pki.strangerCert, key: pki.strangerKey, ca: pki.caCert } },
      tlsOrigins,
    );
    await store.create(
      'own-proxy',
      { proxy: proxy.url.replace('//', '//user:proxy-pass@') },
      originOf(plainTarget.url),
    );
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await Promise.all([tlsTarget.close(), plainTarget.close(), proxy.close()]);
    redis.disconnect();
    await pg.drop();
  });

  it('presents the credential’s client certificate; without one, or with a stranger’s, the handshake fails', async () => {
    const client = executor();
    expect(statusOf(await get(client, tlsTarget.url, 'client-cert'))).toBe(200);
    expect(tlsTarget.clientNames).toEqual(['client']);
    const none = await get(client, tlsTarget.url);
    expect(statusOf(none)).toBe('transport_error');
    expect(statusOf(await get(client, tlsTarget.url, 'stranger-cert'))).toBe('transport_error');
    // Pools are per credential: the certified connection kept alive is not lent to the others.
    expect(tlsTarget.clientNames).toEqual(['client']);
    expect(statusOf(await get(client, tlsTarget.url, 'client-cert'))).toBe(200);
    // The client certificate goes to no other origin: another https server of the same host is refused.
    const other = await startProtectedTarget({
      tls: { cert: pki.serverCert, key: pki.serverKey, ca: pki.caCert },
    });
    try {
      expect(statusOf(await get(client, other.url, 'client-cert'))).toBe('credential_origin_refused');
      expect(other.clientNames).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('EGRESS_PROXY: https through a CONNECT tunnel (mTLS end to end), http forwarded, EGRESS_NO_PROXY direct', async () => {
    const port = (url: string) => new URL(url).port;
    const client = executor({ egressProxy: proxy.url, egressNoProxy: `localhost:${port(plainTarget.url)}` });
    const tunnels = proxy.tunnels.length;
    expect(statusOf(await get(client, tlsTarget.url, 'client-cert'))).toBe(200);
    expect(proxy.tunnels.slice(tunnels)).toEqual([`127.0.0.1:${port(tlsTarget.url)}`]);
    expect(tlsTarget.clientNames.at(-1)).toBe('client');
    const forwarded = proxy.forwarded.length;
    expect(statusOf(await get(client, plainTarget.url))).toBe(200);
    expect(proxy.forwarded.slice(forwarded)).toEqual([plainTarget.url]);
    const direct = executor({ egressProxy: proxy.url, egressNoProxy: `127.0.0.1:${port(plainTarget.url)}` });
    expect(statusOf(await get(direct, plainTarget.url))).toBe(200);
    expect(proxy.forwarded.length).toBe(forwarded + 1);
  });

  it('an https proxy: TLS to the proxy (its CA trusted), then the tunnel (mTLS end to end) or forwarding inside it', async () => {
    const secure = await startConnectProxy({ tls: { cert: pki.serverCert, key: pki.serverKey } });
    try {
      expect(secure.url).toMatch(/^https:/);
      const client = executor({ egressProxy: secure.url, egressProxyCa: pki.caCert });
      expect(statusOf(await get(client, tlsTarget.url, 'client-cert'))).toBe(200);
      expect(secure.tunnels).toEqual([`127.0.0.1:${new URL(tlsTarget.url).port}`]);
      expect(tlsTarget.clientNames.at(-1)).toBe('client');
      expect(statusOf(await get(client, plainTarget.url))).toBe(200);
      expect(secure.forwarded).toEqual([plainTarget.url]);
      expect(secure.tlsHandshakes).toBeGreaterThanOrEqual(2);
      // The proxy's certificate is checked: without its CA the connection is refused, nothing tunnelled.
      const untrusting = executor({ egressProxy: secure.url });
      expect(statusOf(await get(untrusting, plainTarget.url))).toBe('transport_error');
      expect(statusOf(await get(untrusting, tlsTarget.url, 'client-cert'))).toBe('transport_error');
      expect([secure.tunnels.length, secure.forwarded.length]).toEqual([1, 1]);
    } finally {
      await secure.close();
    }
  });

  it('the SSRF guard still judges the final target behind a proxy; the proxy itself is allowed', async () => {
    // Nothing private allowed: the proxy on 127.0.0.1 is still reached, the target on it is not.
    const client = executor({ allowPrivateTargets: [], egressProxy: proxy.url });
    const [tunnels, forwarded] = [proxy.tunnels.length, proxy.forwarded.length];
    expect(statusOf(await get(client, tlsTarget.url.replace('127.0.0.1', 'localhost'), 'client-cert'))).toBe(
      'target_refused',
    );
    expect(statusOf(await get(client, plainTarget.url.replace('127.0.0.1', 'localhost')))).toBe(
      'target_refused',
    );
    expect(statusOf(await get(client, plainTarget.url))).toBe('target_refused');
    expect([proxy.tunnels.length, proxy.forwarded.length]).toEqual([tunnels, forwarded]);
  });

  it('a credential’s own proxy carries its calls, with the proxy’s password as Proxy-Authorization', async () => {
    const client = executor();
    const forwarded = proxy.forwarded.length;
    expect(statusOf(await get(client, plainTarget.url, 'own-proxy'))).toBe(200);
    expect(proxy.forwarded.length).toBe(forwarded + 1);
    expect(proxy.authorizations.at(-1)).toBe(`Basic ${Buffer.from('user:proxy-pass').toString('base64')}`);
    expect(statusOf(await get(client, plainTarget.url))).toBe(200);
    expect(proxy.forwarded.length).toBe(forwarded + 1);
  });
});
