import { connect } from 'node:net';
import type { ResultEnvelope } from '@requester/shared';
import { eventually, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import {
  dropStackDatabase,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * What the service exposes to those who are not a request's owner, through the real service:
 * the admin views (admin API, operator UI, admin CLI) show requests with their secrets hidden,
 * and only a write key's explicit, journaled `reveal` shows them; and no listener of the
 * deployment — the Kafka KRaft controller included — can be reached as a target.
 */
const run = uniqueName('expo');
/** Each secret is unique to this run and to its place in the request, so a leak names its source. */
const secret = (where: string) => `${run}-${where}-S3CRET`;
const SECRETS = [
  'userinfo',
  'query',
  'fragment',
  'authorization',
  'api-key',
  'cookie',
  'body',
  'proxy-data',
  'echo-body',
  'echo-auth',
  'held-auth',
  'held-body',
  'held-query',
].map(secret);

function leaks(text: string): string[] {
  return SECRETS.filter((s) => text.includes(s));
}

describe('admin views hide the secrets of requests; revealing them is a journaled write action', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let client: Awaited<ReturnType<typeof stackKey>>;
  let writer: Awaited<ReturnType<typeof stackKey>>;
  let reader: Awaited<ReturnType<typeof stackKey>>;
  const ids = { dead: `${run}-dead`, echo: `${run}-echo`, hold: `${run}-hold`, held: `${run}-held` };

  beforeAll(async () => {
    target = await startTarget();
    stack = await stackEnv();
    running = await startStack(stack);
    await waitReady(stack);
    [client, writer, reader] = await Promise.all([
      stackKey(stack),
      stackKey(stack, { admin: 'write' }),
      stackKey(stack, { admin: 'read' }),
    ]);
    const port = new URL(target.url).port;
    // A request that fails for good: its dead letter carries every kind of secret.
    await submit({
      request: {
        method: 'POST',
        uri: `http://probe:${secret('userinfo')}@127.0.0.1:${port}/status/404?api_key=${secret('query')}&page=1#access_token=${secret('fragment')}`,
        headers: {
          Authorization: `Bearer ${secret('authorization')}`,
          'X-Api-Key': secret('api-key'),
          Cookie: `sid=${secret('cookie')}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ password: secret('body') }),
      },
      meta: { requestId: ids.dead, proxyData: { token: secret('proxy-data') } },
    });
    // A sync call whose result (held by this process's sync-gateway) echoes a secret body.
    const echo = await submit({
      request: {
        method: 'POST',
        uri: `${target.url}/echo`,
        headers: { authorization: `Basic ${secret('echo-auth')}` },
        body: secret('echo-body'),
      },
      meta: { requestId: ids.echo, sync: true },
    });
    expect(((await echo.json()) as ResultEnvelope).response.body).toBe(secret('echo-body'));
    // An ordered partition held behind a call that hangs: its head task (small enough to ride
    // inline in the queue) carries secrets.
    await submit({
      request: { uri: `${target.url}/hold/${run}` },
      meta: { requestId: ids.hold, partition: `!${run}` },
    });
    await submit({
      request: {
        method: 'PUT',
        uri: `${target.url}/echo?token=${secret('held-query')}`,
        headers: { authorization: secret('held-auth') },
        body: secret('held-body'),
      },
      meta: { requestId: ids.held, partition: `!${run}` },
    });
    await eventually(
      async () =>
        JSON.stringify(await adminJson('/admin/api/dlq?limit=100', writer.token)).includes(ids.dead),
      60_000,
      'the dead letter listed',
    );
    await eventually(
      async () => JSON.stringify(await adminJson('/admin/api/partitions', writer.token)).includes(ids.held),
      60_000,
      'the held partition listed',
    );
  }, 180_000);

  afterAll(async () => {
    target?.release(run);
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  async function submit(envelope: Record<string, unknown>): Promise<Response> {
    const res = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...client.headers, 'content-type': 'application/json' },
      body: JSON.stringify(envelope),
    });
    expect([200, 202], await res.clone().text()).toContain(res.status);
    return res;
  }

  const admin = (route: string, token: string) =>
    fetch(`${stack.adminUrl}${route}`, { headers: { authorization: `Bearer ${token}` } });

  async function adminJson(route: string, token: string): Promise<unknown> {
    const res = await admin(route, token);
    expect(res.status, `${route}: ${await res.clone().text()}`).toBe(200);
    return res.json();
  }

  /** A session of the operator UI, opened by its login form. */
  async function uiCookie(token: string): Promise<string> {
    const res = await fetch(`${stack.adminUrl}/ui/login`, {
      method: 'POST',
      body: new URLSearchParams({ token }),
      redirect: 'manual',
    });
    expect(res.status).toBe(303);
    return (res.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  }

  /** A request's lookup: requestIds are per client, so the operator names whose. */
  const lookup = (requestId: string) => `/admin/api/requests/${requestId}?client=${client.name}`;
  const views = () => [
    '/admin/api/partitions',
    '/admin/api/dlq?limit=100',
    lookup(ids.dead),
    lookup(ids.echo),
    lookup(ids.held),
  ];

  it('a read key sees every view with the requests and none of their secrets', async () => {
    for (const view of views()) {
      const text = JSON.stringify(await adminJson(view, reader.token));
      expect(leaks(text), view).toEqual([]);
    }
    const partitions = JSON.stringify(await adminJson('/admin/api/partitions', reader.token));
    expect(partitions).toContain(ids.held);
    expect(partitions).toContain('[redacted]');
    const dlq = (await adminJson(`/admin/api/dlq?requestId=${ids.dead}`, reader.token)) as {
      entries: Array<{ uri: string }>;
    };
    expect(dlq.entries[0]?.uri).toBe(
      `http://[redacted]@127.0.0.1:${new URL(target.url).port}/status/404?api_key=[redacted]&page=1#access_token=[redacted]`,
    );
    const echo = (await adminJson(lookup(ids.echo), reader.token)) as {
      result: ResultEnvelope;
    };
    expect(echo.result.response.status).toBe(200);
    expect(echo.result.response.body).toMatch(/^\[redacted: \d+ bytes\]$/);

    // The operator UI reads through the same views.
    const cookie = await uiCookie(reader.token);
    for (const page of [
      `/ui/requests?id=${ids.dead}&client=${client.name}`,
      `/ui/requests?id=${ids.echo}&client=${client.name}`,
      '/ui/partitions/live',
    ])
      expect(
        leaks(await (await fetch(`${stack.adminUrl}${page}`, { headers: { cookie } })).text()),
        page,
      ).toEqual([]);
  });

  it('reveal: refused to a read key, shown to a write key and journaled as its action', async () => {
    for (const view of views()) {
      const join = view.includes('?') ? '&' : '?';
      const refused = await admin(`${view}${join}reveal=true`, reader.token);
      expect(refused.status, view).toBe(403);
      expect(leaks(await refused.text())).toEqual([]);
    }
    const dead = JSON.stringify(await adminJson(`${lookup(ids.dead)}&reveal=true`, writer.token));
    expect(dead).toContain(secret('userinfo'));
    expect(dead).toContain(secret('query'));
    const echo = JSON.stringify(await adminJson(`${lookup(ids.echo)}&reveal=true`, writer.token));
    expect(echo).toContain(secret('echo-body'));
    const partitions = JSON.stringify(await adminJson('/admin/api/partitions?reveal=true', writer.token));
    expect(partitions).toContain(secret('held-auth'));
    const list = JSON.stringify(
      await adminJson(`/admin/api/dlq?requestId=${ids.dead}&reveal=true`, writer.token),
    );
    expect(list).toContain(secret('query'));

    const reveals = async (requestId: string) => {
      const { events } = (await adminJson(`/admin/api/requests/${requestId}/events`, writer.token)) as {
        events: Array<Record<string, unknown>>;
      };
      return events.filter((e) => e.type === 'admin_action' && e.action === 'secrets.reveal');
    };
    await eventually(async () => (await reveals(ids.dead)).length >= 2, 15_000, 'reveals of the dead letter');
    expect(await reveals(ids.dead)).toEqual(
      expect.arrayContaining([expect.objectContaining({ actor: writer.name, outcome: 'done' })]),
    );
    await eventually(
      async () => (await reveals(ids.held)).length >= 1,
      15_000,
      'the reveal of the partitions',
    );
    await eventually(async () => (await reveals(ids.echo)).length >= 1, 15_000, 'the reveal of the echo');
    expect(await reveals(ids.echo)).toEqual([expect.objectContaining({ actor: writer.name })]);
  });

  it('the admin CLI hides them too; --reveal shows them and journals it as cli:<user>', async () => {
    const list = async (...flags: string[]) => {
      const { code, stdout, stderr } = await requester(
        ['dlq', 'list', '--request-id', ids.dead, '--json', ...flags],
        stack.env,
      ).exit;
      expect(code, stderr).toBe(0);
      return stdout;
    };
    const hidden = await list();
    expect(hidden).toContain(ids.dead);
    expect(leaks(hidden)).toEqual([]);
    const shown = await list('--reveal');
    expect(shown).toContain(secret('authorization'));
    expect(shown).toContain(secret('body'));
    await eventually(
      async () => {
        const { events } = (await adminJson(`/admin/api/requests/${ids.dead}/events`, writer.token)) as {
          events: Array<Record<string, unknown>>;
        };
        return events.some(
          (e) => e.action === 'secrets.reveal' && typeof e.actor === 'string' && e.actor.startsWith('cli:'),
        );
      },
      15_000,
      'the CLI reveal in the journal',
    );
  }, 60_000);
});

describe('no listener of the deployment is a target, whatever ALLOW_PRIVATE_TARGETS says', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let client: Awaited<ReturnType<typeof stackKey>>;
  const broker = new URL(`kafka://${(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',')[0]}`);
  /** infra/kafka.sh runs the KRaft controller at the broker's port + 1. */
  const controller = `${broker.hostname}:${Number(broker.port) + 1}`;

  beforeAll(async () => {
    // Every loopback target allowed: only the own-listener rule stands between a request and them.
    stack = await stackEnv({ ALLOW_PRIVATE_TARGETS: '127.0.0.0/8' });
    running = await startStack(stack);
    await waitReady(stack);
    client = await stackKey(stack);
  }, 120_000);

  afterAll(async () => {
    await running?.shutdown('test over');
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('the Kafka controller port listens here, so a refusal is the guard’s, not an empty port', async () => {
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(broker.port) + 1, broker.hostname, () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', reject);
    });
  });

  it.each([
    ['the Kafka KRaft controller', () => controller],
    ['the Kafka broker', () => broker.host],
    ['Redis', () => '127.0.0.1:6379'],
    ['PostgreSQL', () => '127.0.0.1:5432'],
    ['the HTTP API', () => new URL(stack.httpUrl).host],
    ['the admin port (/metrics names every key)', () => new URL(stack.adminUrl).host],
  ])('%s: target_refused, no call made', async (_name, hostPort) => {
    const res = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { ...client.headers, 'content-type': 'application/json' },
      body: JSON.stringify({
        request: { uri: `http://${hostPort()}/metrics` },
        meta: { requestId: uniqueName('own'), sync: true },
      }),
    });
    expect(res.status).toBe(200);
    const result = (await res.json()) as ResultEnvelope;
    expect(result.meta.error?.code, JSON.stringify(result.meta.error)).toBe('target_refused');
    expect(result.meta.error?.message).toMatch(/Requester's own/);
  });
});
