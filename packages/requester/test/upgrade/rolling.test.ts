import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { KafkaProducer } from '@requester/shared';
import { eventually, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateJsonSchema } from '../../../shared/src/contract/testing/mini-json-schema.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  stackEnv,
} from '../e2e/stack.fixture.ts';
import {
  CURRENT_BIN,
  counter,
  installPreviousRelease,
  migrateWith,
  type PreviousRelease,
  ROOT,
  type RoleProcess,
  startRole,
  storesOf,
} from './release.fixture.ts';

/**
 * A rolling upgrade from the previous release (the CHANGELOG's newest version, its git tag) to
 * this checkout, on one set of stores: the previous release's roles serve, two clients send
 * ordered, unordered and scheduled requests (one over HTTP, one straight to `in`), the new
 * migrations are applied, then each role is replaced one process at a time (SIGTERM, as a rollout
 * does) while both versions' processes run side by side. Nothing may be lost, every ordered
 * partition keeps its order, every result is valid for both versions' result schema; duplicates
 * are counted. What it checks and what it measured: docs/reliability.md, "Rolling upgrade".
 */
const run = promisify(execFile);
const CLIENTS = ['alpha', 'beta'] as const; // alpha: HTTP entry; beta: Kafka entry
const ORDERED_KEYS = 3; // per client

let release: PreviousRelease;
let stack: StackEnv;
let target: Target;
let results: ResultCollector;
let producer: KafkaProducer;
let work: string;
const running = new Set<RoleProcess>();
let load: ReturnType<typeof traffic> | undefined;
const tokens: Record<string, string> = {};

async function start(version: 'old' | 'new', name: string, roles: string): Promise<RoleProcess> {
  const role = await startRole({
    bin: version === 'old' ? release.bin : CURRENT_BIN,
    name: `${version === 'old' ? release.version : 'new'} ${name}`,
    roles,
    env: stack.env,
    logDir: work,
  });
  running.add(role);
  return role;
}

async function stop(role: RoleProcess): Promise<void> {
  await role.stop();
  running.delete(role);
}

beforeAll(async () => {
  work = mkdtempSync(path.join(ROOT, '.run', 'upgrade-'));
  release = await installPreviousRelease(path.join(work, 'release'));
  console.info(
    `previous release ${release.tag} (${release.commit.slice(0, 7)}): installed in ${(release.installMs / 1000).toFixed(1)} s`,
  );
  stack = await stackEnv({
    KAFKA_CLIENT_ID: uniqueName('upg'),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'info',
    KAFKA_SESSION_TIMEOUT: '6s',
    SHUTDOWN_TIMEOUT: '20s',
    MAX_WORKERS: '8',
  });
  // The stores as the previous release made them: its topics, its migrations, its keys.
  await storesOf(release.bin, stack);
  await Promise.all(
    CLIENTS.map(async (client) => {
      const flags = client === 'beta' ? ['--kafka-entry'] : ['--sync', '--schedule'];
      const out = await run(release.bin, ['keys', 'create', '--name', client, ...flags], {
        env: { ...process.env, ...stack.env },
      });
      tokens[client] = out.stdout.trim();
    }),
  );
  target = await startTarget();
  results = new ResultCollector(stack.config.topicOut);
  await results.start();
  producer = await kafkaProducer();
}, 300_000);

afterAll(async () => {
  // A test that failed half-way leaves its traffic running: stop it before its clients close.
  await load?.abort();
  await Promise.all([...running].map((role) => role.stop()));
  await results?.stop();
  await producer?.disconnect();
  await target?.close();
  if (stack) await dropStackDatabase(stack);
  if (work && !process.env.KEEP_UPGRADE_DIR) rmSync(work, { recursive: true, force: true });
}, 120_000);

/**
 * Both clients' traffic until `stop()`: each round, per client, one request per ordered key and
 * one unordered, every fourth of those scheduled 2 s ahead (through the outbox and the relay).
 */
function traffic(gateway: () => string) {
  const sent: Array<{ id: string; client: string; key?: string; seq: number }> = [];
  let stopped = false;
  let aborted = false;
  const requestOf = (client: string, seq: number, k?: number) => {
    const key = k === undefined ? undefined : `${client}-k${k}`;
    const scheduled = key === undefined && seq % 4 === 0;
    const id = `${client}-${key ?? (scheduled ? 's' : 'u')}-${seq}`;
    return {
      id,
      key,
      envelope: {
        request: { uri: `${target.url}/random-delay/20?id=${id}${key ? `&key=${key}&seq=${seq}` : ''}` },
        meta: {
          requestId: id,
          // A connection reset by the loaded box's target is not what this test is about.
          retry: { max: 3 },
          ...(key ? { partition: `!${key}` } : {}),
          ...(scheduled ? { scheduled: new Date(Date.now() + 2_000).toISOString() } : {}),
          ...(client === 'beta' ? { client } : {}),
        },
      },
    };
  };
  const submitHttp = async (envelope: unknown): Promise<void> => {
    // A gateway stopping under the caller: try again (the same requestId) at the gateway of now.
    for (let attempt = 1; ; attempt++) {
      const status = await fetch(`${gateway()}/request`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.alpha}` },
        body: JSON.stringify(envelope),
        signal: AbortSignal.timeout(30_000),
      }).then(
        async (res) => {
          await res.arrayBuffer();
          return res.status;
        },
        () => 0,
      );
      if (status === 202 || aborted) return;
      if ((status > 0 && status < 500 && status !== 429) || attempt >= 60)
        throw new Error(`alpha: ${JSON.stringify(envelope)} answered ${status}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  };
  const loop = async (client: (typeof CLIENTS)[number]) => {
    for (let seq = 0; !stopped; seq++) {
      const round = [
        ...Array.from({ length: ORDERED_KEYS }, (_, k) => requestOf(client, seq, k)),
        requestOf(client, seq),
      ];
      if (client === 'alpha') {
        // One after the other within a key: an ordered partition's order is its acceptance order.
        await Promise.all(round.map((r) => submitHttp(r.envelope)));
      } else {
        await producer.send(
          stack.config.topicIn,
          round.map((r) => ({ key: r.key ?? r.id, value: JSON.stringify(r.envelope) })),
        );
      }
      for (const r of round) sent.push({ id: r.id, client, ...(r.key ? { key: r.key } : {}), seq });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  };
  const loops = CLIENTS.map((client) => loop(client));
  return {
    sent,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
    /** After a failure: no more tries either, and no error from what is left. */
    async abort() {
      aborted = true;
      stopped = true;
      await Promise.allSettled(loops);
    },
  };
}

describe('rolling upgrade from the previous release', () => {
  it('loses nothing, keeps each ordered partition in order, and both versions read every result', async () => {
    const [oldGateway, router, executor1, executor2, relay] = await Promise.all([
      start('old', 'gateway', 'ingress,sync-gateway'),
      start('old', 'router', 'router'),
      start('old', 'executor-1', 'executor'),
      start('old', 'executor-2', 'executor'),
      start('old', 'relay', 'relay'),
    ]);
    const old = { gateway: oldGateway, router, executors: [executor1, executor2], relay };
    let gateway = old.gateway;
    const sending = traffic(() => gateway.httpUrl as string);
    load = sending;
    const answered = (client?: string) =>
      sending.sent.filter((s) => (client === undefined || s.client === client) && results.byId.has(s.id))
        .length;
    // At every step of the rollout each client goes on being served: neither waits behind the other.
    const progress = async (what: string) => {
      const before = CLIENTS.map((client) => answered(client));
      await results.until(
        () => CLIENTS.every((client, i) => answered(client) >= (before[i] ?? 0) + 10),
        120_000,
        `10 more results of each client ${what}`,
      );
    };
    await progress('from the previous release alone');
    const leased = (executor: RoleProcess) => counter(executor, 'queue_leased_total');
    const oldLeased = await Promise.all(old.executors.map(leased));

    // The rollout: migrations first (the old roles keep serving on the new schema), then the
    // executors one at a time, then the router, the relay and the gateway.
    await migrateWith(CURRENT_BIN, stack.env);
    await progress('after the new migrations');
    const [oldExecutor1, oldExecutor2] = old.executors as [RoleProcess, RoleProcess];
    const newExecutor1 = await start('new', 'executor-1', 'executor');
    // Side by side on one queue: each version leases tasks while the other is there.
    const before = await leased(oldExecutor2);
    await eventually(
      async () => (await leased(oldExecutor2)) > before && (await leased(newExecutor1)) > 0,
      120_000,
      'an old and a new executor both leasing',
    );
    await stop(oldExecutor1);
    await progress('after the first old executor stopped');
    const newExecutor2 = await start('new', 'executor-2', 'executor');
    await stop(oldExecutor2);
    await progress('after the last old executor stopped');

    // The previous release's sync-gateway answers from a result this release's executor wrote.
    const sync = await fetch(`${old.gateway.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.alpha}` },
      body: JSON.stringify({
        request: { uri: '', body: 'across' },
        meta: { requestId: 'sync-across', sync: true },
      }),
      signal: AbortSignal.timeout(60_000),
    });
    const syncResult = {
      status: sync.status,
      body: ((await sync.json()) as { response?: { body?: string } }).response?.body,
    };
    // A field this release added is refused at the previous release's door (400), not accepted
    // and lost: new fields wait until every role runs this release (the CHANGELOG's upgrade note).
    const newFieldAtOldDoor = await postAlpha(old.gateway, withNewFields('new-field-old-door'));

    const [newRouter, newRelay, newGateway] = await Promise.all([
      start('new', 'router', 'router'),
      start('new', 'relay', 'relay'),
      start('new', 'gateway', 'ingress,sync-gateway'),
    ]);
    await stop(old.router);
    await stop(old.relay);
    gateway = newGateway;
    await stop(old.gateway);
    await progress('with this release alone');
    await sending.stop();
    // Once every role runs this release, its new fields work from both entries.
    const newFieldAtNewDoor = await postAlpha(newGateway, withNewFields('new-field-http'));
    await producer.send(stack.config.topicIn, [
      { key: 'new-field-kafka', value: JSON.stringify(withNewFields('new-field-kafka', 'beta')) },
    ]);
    const ids = sending.sent.map((s) => s.id);
    await results.until(() => answered() === ids.length, 180_000, `all ${ids.length} results`);

    const callsOf = new Map<string, number>();
    const seqsOf = new Map<string, number[]>();
    for (const call of target.calls) {
      const url = new URL(call.path, 'http://target');
      const id = url.searchParams.get('id');
      if (id) callsOf.set(id, (callsOf.get(id) ?? 0) + 1);
      const key = url.searchParams.get('key');
      if (key) seqsOf.set(key, [...(seqsOf.get(key) ?? []), Number(url.searchParams.get('seq'))]);
    }
    // At-least-once: duplicates are allowed, and counted (docs/reliability.md, "Rolling upgrade").
    const more = (count: (id: string) => number) => ids.filter((id) => count(id) > 1).length;
    console.info(
      `rolling upgrade ${release.tag} → this checkout: ${ids.length} requests ` +
        `(${sending.sent.filter((s) => s.key).length} ordered, on ${CLIENTS.length * ORDERED_KEYS} partitions); ` +
        `${more((id) => results.byId.get(id)?.length ?? 0)} with more than one result, ` +
        `${more((id) => callsOf.get(id) ?? 0)} called more than once, ` +
        `${more((id) => results.byId.get(id)?.[0]?.meta.tryCount ?? 0)} retried; ` +
        `install of ${release.tag} ${(release.installMs / 1000).toFixed(1)} s`,
    );

    // No task lost: each has a result, a success (the target answers 200 to each), and was called.
    const notOk = ids.filter((id) => results.byId.get(id)?.[0]?.response.status !== 200);
    expect(notOk.map((id) => ({ id, result: results.byId.get(id)?.[0] }))).toEqual([]);
    expect(ids.filter((id) => !callsOf.has(id))).toEqual([]);

    // Every ordered partition in order: its calls, repeats of one request (at-least-once) aside.
    for (const client of CLIENTS)
      for (let k = 0; k < ORDERED_KEYS; k++) {
        const key = `${client}-k${k}`;
        const seqs = (seqsOf.get(key) ?? []).filter((seq, i, all) => i === 0 || all[i - 1] !== seq);
        expect(seqs, key).toEqual(sending.sent.filter((s) => s.key === key).map((s) => s.seq));
      }

    // Well-formed for consumers of either version: each result against both result schemas.
    const schemas = [ROOT, release.root].map(
      (root) =>
        JSON.parse(readFileSync(path.join(root, 'contracts/result.schema.json'), 'utf8')) as Parameters<
          typeof validateJsonSchema
        >[1],
    );
    const invalid = [...results.byId.values()].flatMap((copies) =>
      copies.flatMap((result) =>
        schemas.flatMap((schema, version) => {
          const errors = validateJsonSchema(result, schema);
          return errors.length > 0 ? [{ id: result.meta.requestId, version, errors }] : [];
        }),
      ),
    );
    expect(invalid).toEqual([]);

    // Both versions executed, also side by side on one queue; the new router and relay took over.
    expect(
      oldLeased.every((n) => n > 0),
      `old executors leased ${oldLeased}`,
    ).toBe(true);
    expect(await leased(newExecutor2)).toBeGreaterThan(0);
    expect(syncResult).toEqual({ status: 200, body: 'across' });
    expect(await counter(newRouter, 'router_records_total')).toBeGreaterThan(0);
    expect(await counter(newRelay, 'relay_moved_total')).toBeGreaterThan(0);

    expect(newFieldAtOldDoor).toBe(400);
    expect(newFieldAtNewDoor).toBe(202);
    for (const id of ['new-field-http', 'new-field-kafka'])
      expect((await results.one(id, 60_000)).response.status, id).toBe(200);

    // Neither version logged an error (an unreadable record, a failing script, a refused row).
    expect(errorLines(work)).toEqual([]);
  }, 600_000);
});

/** A request with fields of this release that the previous one does not know. */
function withNewFields(requestId: string, client?: string) {
  return {
    request: { uri: `${target.url}/echo`, method: 'POST', body: requestId },
    meta: { requestId, priority: 5, timeout: '20s', ...(client ? { client } : {}) },
  };
}

/** POST /request as client alpha at one gateway: its status. */
async function postAlpha(gateway: RoleProcess, envelope: unknown): Promise<number> {
  const res = await fetch(`${gateway.httpUrl}/request`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.alpha}` },
    body: JSON.stringify(envelope),
    signal: AbortSignal.timeout(60_000),
  });
  await res.arrayBuffer();
  return res.status;
}

/** The error and fatal lines of every role's log in `dir`. */
function errorLines(dir: string): string[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.log'))
    .flatMap((file) =>
      readFileSync(path.join(dir, file), 'utf8')
        .split('\n')
        .filter((line) => /"level":"(error|fatal)"/.test(line))
        .map((line) => `${file}: ${line.slice(0, 300)}`),
    );
}
