import { randomBytes } from 'node:crypto';
import { type KafkaRecord, loadConfig, type ResultEnvelope } from '@requester/shared';
import {
  capturingLogger,
  freePort,
  type ProtectedTarget,
  readTopic,
  startProtectedTarget,
  startTarget,
  startTokenEndpoint,
  type Target,
  type TokenEndpoint,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStandardWebhook } from '../../../executor/src/signing/verify.fixture.ts';
import { type RunningProcess, startProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  waitReady,
} from './stack.fixture.ts';

/**
 * Named target credentials through the whole service (docs/architecture.md §10): created with the
 * admin API, named by requests (`meta.credentials`), used by two executors that share one OAuth2
 * token, refused at the edge when out of the key's scope or unknown, failing their tasks once
 * revoked; and no secret in `out`, the DLQ, the journal, the logs or `/metrics`.
 */
const CLIENT = { id: 'requester-e2e', secret: `cs-${randomBytes(16).toString('hex')}` };
const MASTER_KEY = randomBytes(32).toString('base64');
/** CREDENTIALS_CACHE_TTL of the stack: how long an executor trusts a credential it read. */
const CACHE_TTL_MS = 200;
/** A signing credential mid-rotation: the new secret and the old one sign together. */
const SIGNING = [
  `whsec_${randomBytes(24).toString('base64')}`,
  `whsec_${randomBytes(24).toString('base64')}`,
];

describe('end to end: target credentials', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let second: RunningProcess;
  let tokens: TokenEndpoint;
  let target: ProtectedTarget;
  let hooks: Target;
  let results: ResultCollector;
  let caller: Awaited<ReturnType<typeof stackKey>>;
  let unscoped: Awaited<ReturnType<typeof stackKey>>;
  let operator: Awaited<ReturnType<typeof stackKey>>;
  const logs = capturingLogger('debug');

  beforeAll(async () => {
    tokens = await startTokenEndpoint(CLIENT);
    target = await startProtectedTarget({ tokens });
    hooks = await startTarget();
    stack = await stackEnv({
      CREDENTIALS_MASTER_KEY: `e2e:${MASTER_KEY}`,
      CREDENTIALS_CACHE_TTL: `${CACHE_TTL_MS}ms`,
      // The revocation test below writes straight to `in`, naming the credential without a client.
      KAFKA_ANONYMOUS_CREDENTIALS: 'partner-billing',
    });
    running = await startProcess(['ingress', 'router', 'executor', 'relay'], stack.config, logs.logger);
    // A second executor, in a process of its own (its own admin port), sharing Redis and PostgreSQL.
    const secondConfig = loadConfig({ ...stack.env, ADMIN_PORT: String(await freePort()) });
    second = await startProcess(['executor'], secondConfig, logs.logger.child({ process: 'second' }));
    await waitReady(stack);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    caller = await stackKey(stack, { credentials: ['partner-billing', 'partner-hooks'] });
    unscoped = await stackKey(stack);
    operator = await stackKey(stack, { admin: 'write' });
    const created = await admin('create', {
      name: 'partner-billing',
      secrets: {
        oauth2: { tokenUrl: tokens.url, clientId: CLIENT.id, clientSecret: CLIENT.secret, scope: 'pay' },
      },
      origins: [new URL(target.url).origin],
    });
    expect(created.status).toBe(200);
  }, 180_000);

  afterAll(async () => {
    await results?.stop();
    await second?.shutdown('test over');
    await running?.shutdown('test over');
    await Promise.all([tokens?.close(), target?.close(), hooks?.close()]);
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const admin = (verb: string, body: unknown) =>
    fetch(`${stack.adminUrl}/admin/api/credentials/${verb}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operator.headers },
      body: JSON.stringify(body),
    });
  const post = (body: unknown, headers = caller.headers) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const request = (requestId: string, credentials = 'partner-billing') => ({
    request: { uri: target.url, method: 'GET' },
    meta: { requestId, credentials },
  });

  it('1,000 requests over 2 executors get the target’s 200 with one token request', async () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `cred-${i}`);
    for (let i = 0; i < ids.length; i += 50)
      await Promise.all(
        ids.slice(i, i + 50).map(async (id) => expect((await post(request(id))).status).toBe(202)),
      );
    await results.until(() => ids.every((id) => results.byId.has(id)), 240_000, '1,000 results');
    const answers = ids.map((id) => results.byId.get(id)?.[0] as ResultEnvelope);
    // A failure shows its error, not only its status.
    const failed = answers.filter((r) => r.response.status !== 200);
    expect(failed.map((r) => `${r.response.status} ${r.meta.error?.code}: ${r.meta.error?.message}`)).toEqual(
      [],
    );
    expect(tokens.requests).toHaveLength(1);
    expect(tokens.requests[0]).toMatchObject({ method: 'basic', form: { scope: 'pay' } });
    // Both executors called the target (each logs its calls at debug), on the one token.
    const answered = logs.lines.filter((line) => line.msg === 'target answered');
    expect(answered.some((line) => line.process === 'second')).toBe(true);
    expect(answered.some((line) => line.process === undefined)).toBe(true);
  }, 300_000);

  it('the admin API lists credentials without secrets; a read key may not act', async () => {
    const reader = await stackKey(stack, { admin: 'read' });
    const listed = await fetch(`${stack.adminUrl}/admin/api/credentials`, { headers: reader.headers });
    expect(listed.status).toBe(200);
    const body = await listed.text();
    expect(JSON.parse(body)).toMatchObject([{ name: 'partner-billing', version: 1, masterKeyId: 'e2e' }]);
    expect(body).not.toContain(CLIENT.secret);
    const refused = await fetch(`${stack.adminUrl}/admin/api/credentials/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...reader.headers },
      body: JSON.stringify({ name: 'partner-billing' }),
    });
    expect(refused.status).toBe(403);
    const bad = await admin('create', {
      name: 'bad',
      secrets: { oauth2: { tokenUrl: 'x', clientSecret: CLIENT.secret } },
    });
    expect(bad.status).toBe(400);
    const problem = await bad.text();
    expect(problem).toContain('oauth2.tokenUrl');
    expect(problem).not.toContain(CLIENT.secret);
  });

  it('refuses at the edge a credential outside the key’s scope, and an unknown one', async () => {
    const forbidden = await post(request('cred-unscoped'), unscoped.headers);
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({
      code: 'forbidden',
      issues: [{ path: 'meta.credentials' }],
    });
    const wide = await stackKey(stack, { credentials: ['partner-billing', 'no-such-one'] });
    const unknown = await post(request('cred-unknown', 'no-such-one'), wide.headers);
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ code: 'credential_unknown' });
  });

  it('signs with a signing credential of the store (two secrets mid-rotation), within the key’s scope only', async () => {
    const created = await admin('create', {
      name: 'partner-hooks',
      secrets: { signing: SIGNING },
      origins: new URL(hooks.url).origin,
    });
    const view = await created.text();
    expect(created.status, view).toBe(200);
    expect(JSON.parse(view)).toMatchObject({
      name: 'partner-hooks',
      summary: { signing: { scheme: 'standard-webhooks', secrets: 2 } },
    });
    for (const secret of SIGNING) expect(view).not.toContain(secret);
    const body = '{"invoice":12}';
    const signed = (requestId: string) => ({
      request: { uri: `${hooks.url}/echo?id=${requestId}`, method: 'POST', body },
      meta: { requestId, signing: { keyId: 'partner-hooks' } },
    });
    expect((await post(signed('hook-signed'))).status).toBe(202);
    await results.until(() => results.byId.has('hook-signed'), 60_000, 'the signed result');
    expect(results.byId.get('hook-signed')?.[0]?.response.status).toBe(200);
    const call = hooks.calls.find((c) => c.path.includes('id=hook-signed'));
    const headers = call?.headers as Record<string, string>;
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(2);
    // Each secret verifies alone: a receiver on the old one and one on the new both accept it.
    for (const secret of SIGNING)
      expect(verifyStandardWebhook(secret, headers, call?.body ?? '', Date.now() / 1000)).toBe(true);
    const forbidden = await post(signed('hook-unscoped'), unscoped.headers);
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({
      code: 'forbidden',
      issues: [{ path: 'meta.signing.keyId' }],
    });
  }, 120_000);

  it('a revoked credential fails its tasks with credential_revoked, dead-lettered', async () => {
    expect((await admin('revoke', { name: 'partner-billing' })).status).toBe(200);
    // The contract: a revocation applies within CREDENTIALS_CACHE_TTL (executors trust what they
    // read for that long, and the test before this one read this credential). Tasks sent once it
    // has passed must fail; sent sooner, a fast path may still find the cached, valid copy.
    await new Promise((resolve) => setTimeout(resolve, 2 * CACHE_TTL_MS));
    // Straight to `in` (no API key, no client): the executors judge it, not the ingress.
    const producer = await kafkaProducer();
    const ids = ['revoked-1', 'revoked-2', 'revoked-3'];
    try {
      await producer.send(
        stack.config.topicIn,
        ids.map((id) => ({ key: id, value: JSON.stringify(request(id)) })),
      );
      await results.until(() => ids.every((id) => results.byId.has(id)), 60_000, 'results of revoked');
    } finally {
      await producer.disconnect();
    }
    for (const id of ids) {
      const result = results.byId.get(id)?.[0] as ResultEnvelope;
      expect(result.response.status).toBe(403);
      expect(result.meta.error).toMatchObject({
        code: 'credential_revoked',
        message: 'credential partner-billing is revoked',
      });
    }
    const dlq = await readTopic(stack.config.topicDlq, (m) =>
      ids.every((id) => m.some((r) => text([r]).includes(id))),
    );
    expect(text(dlq)).toContain('credential_revoked');
  }, 120_000);

  it('no secret in out, the DLQ, the journal, the logs or /metrics', async () => {
    const secrets = [
      CLIENT.secret,
      MASTER_KEY,
      ...tokens.issued,
      ...SIGNING,
      ...SIGNING.map((s) => s.slice(6)),
    ];
    expect(tokens.issued.length).toBeGreaterThan(0);
    const all = (m: KafkaRecord[]) => m.length > 0;
    const out = text(await readTopic(stack.config.topicOut, seen('cred-999', 'revoked-3', 'hook-signed')));
    const dlq = text(await readTopic(stack.config.topicDlq, all));
    const journal = text(
      await readTopic(stack.config.topicEvents, seen('cred-999', 'revoked-3', 'hook-signed')),
    );
    const logText = JSON.stringify(logs.lines);
    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    // Each place really holds what it should, so the greps below are not vacuous.
    expect(out).toContain('cred-999');
    expect(out).toContain('hook-signed');
    expect(journal).toContain('cred-999');
    expect(metrics).toContain('requester_credential_token_fetches_total');
    expect(logText).toContain('credentials.create');
    for (const [where, content] of Object.entries({ out, dlq, journal, logs: logText, metrics }))
      for (const secret of secrets) expect(content.includes(secret), `${where} holds a secret`).toBe(false);
    // The target got the token, never the client secret.
    expect(logText).not.toContain('Bearer at-');
  }, 120_000);
});

/** A readTopic condition: every one of `needles` seen in some record (each record looked at once). */
function seen(...needles: string[]): (messages: KafkaRecord[]) => boolean {
  const missing = new Set(needles);
  let looked = 0;
  return (messages) => {
    for (; looked < messages.length; looked++) {
      const record = text([messages[looked] as KafkaRecord]);
      for (const needle of missing) if (record.includes(needle)) missing.delete(needle);
    }
    return missing.size === 0;
  };
}

function text(messages: KafkaRecord[]): string {
  return messages.map((m) => `${m.key?.toString() ?? ''} ${m.value?.toString() ?? ''}`).join('\n');
}
