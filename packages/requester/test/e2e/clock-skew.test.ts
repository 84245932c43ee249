import path from 'node:path';
import { type KafkaProducer, loadConfig } from '@requester/shared';
import { eventually, freePort, silentLogger, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningProcess, startProcess } from '../../src/runtime/index.ts';
import { type ArrivalTarget, busiestWindow, startArrivalTarget } from './arrival.fixture.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  spawnRequester,
  stackEnv,
  waitReady,
} from './stack.fixture.ts';

/** Executors whose wall clocks are this far ahead of and behind the rest (the target's included). */
const SKEW_MS = 2_000;
const SKEWED_CLOCK = path.resolve(import.meta.dirname, '../skewed-clock.ts');
/**
 * How long after its start-by deadline a call may still reach the target: the executor judges the
 * deadline by Redis's clock (to within half a round trip), then the call's own way out (its gates,
 * a connection, this box's lag under load) comes after the check. Half the skew, so that a
 * deadline judged by the slow executor's own clock would show.
 */
const LATE_TOLERANCE_MS = SKEW_MS / 2;

/**
 * Two executors whose clocks are 2 s ahead and 2 s behind (docs/reliability.md): the queue, the
 * limiter and the leases take their time from Redis, so a limit still holds by arrival at a real
 * target (its own process, true clock), no scheduled task is called early by the target's clock,
 * and calls that outlive several lease periods are called once. Start-by deadlines are judged by
 * Redis's clock too: the fast executor expires no task before its deadline, and the slow one calls
 * none past it (beyond LATE_TOLERANCE_MS).
 */
describe(`executors with clocks ${SKEW_MS} ms ahead and behind`, () => {
  let stack: StackEnv;
  let front: RunningProcess;
  const executors: Array<ReturnType<typeof spawnRequester>> = [];
  const adminUrls: string[] = [];
  let target: ArrivalTarget;
  let results: ResultCollector;
  let producer: KafkaProducer;

  beforeAll(async () => {
    target = await startArrivalTarget();
    stack = await stackEnv({ MAX_WORKERS: '8', EXECUTOR_LEASE_TTL: '2s' });
    // The router and relay on the true clock, in this process; the two executors skewed.
    front = await startProcess(['ingress', 'router', 'relay'], stack.config, silentLogger);
    await waitReady(stack);
    for (const [i, skew] of [SKEW_MS, -SKEW_MS].entries()) {
      const adminPort = await freePort();
      const env = {
        ...stack.env,
        ADMIN_PORT: String(adminPort),
        HTTP_PORT: '0',
        CLOCK_SKEW_MS: String(skew),
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${SKEWED_CLOCK}`,
        KAFKA_CLIENT_ID: `${stack.name}-x${i}`,
      };
      executors.push(spawnRequester({ ...stack, env, config: loadConfig(env) }, 'executor'));
      adminUrls.push(`http://127.0.0.1:${adminPort}`);
    }
    // Both leasing before the first request: a test's tasks must meet both clocks.
    for (const url of adminUrls)
      await eventually(
        () =>
          fetch(`${url}/readyz`).then(
            (r) => r.status === 200,
            () => false,
          ),
        60_000,
        `executor at ${url} ready`,
      );
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    producer = await kafkaProducer();
  }, 120_000);

  afterAll(async () => {
    await producer?.disconnect();
    await results?.stop();
    for (const { child, exited } of executors) {
      child.kill('SIGTERM');
      await exited;
    }
    await front?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 120_000);

  it('keeps a limit by arrival, calls no scheduled task early, and calls each long task once', async () => {
    const run = uniqueName('skew');
    const limiter = { key: run, algorithm: 'sliding-window-log', rates: [{ duration: '1s', value: 5 }] };
    const records: Array<{ key: string; value: string }> = [];
    const send = (requestId: string, uri: string, meta: Record<string, unknown> = {}) =>
      records.push({
        key: requestId,
        value: JSON.stringify({ request: { uri }, meta: { requestId, ...meta } }),
      });
    const limited = Array.from({ length: 20 }, (_, i) => `${run}-l${i}`);
    for (const id of limited) send(id, `${target.url}/${id}`, { limiter });
    // Due 3–6 s from now by the true clock: the executor 2 s ahead must not call them early.
    const now = Date.now();
    const scheduled = Array.from({ length: 10 }, (_, i) => ({
      id: `${run}-s${i}`,
      due: now + 3_000 + i * 300,
    }));
    for (const { id, due } of scheduled)
      send(id, `${target.url}/${id}`, { scheduled: new Date(due).toISOString() });
    // Each call outlives its 2 s lease twice over: heartbeats keep it, by whichever clock.
    const long = Array.from({ length: 4 }, (_, i) => `${run}-slow${i}`);
    for (const id of long) send(id, `${target.url}/${id}?delay=4500`);
    await producer.send(stack.config.topicIn, records);

    const ids = [...limited, ...scheduled.map((s) => s.id), ...long];
    await results.until(() => ids.every((id) => results.byId.has(id)), 120_000, `${ids.length} results`);
    for (const id of ids) expect(results.byId.get(id)?.[0], id).toMatchObject({ response: { status: 200 } });

    const arrivals = (await target.arrivals()).filter((a) => a.path.startsWith(`/${run}-`));
    const at = (id: string) =>
      arrivals.filter((a) => a.path === `/${id}` || a.path.startsWith(`/${id}?`)).map((a) => a.at);
    expect(busiestWindow(limited.flatMap(at), 1_000)).toBeLessThanOrEqual(5);
    for (const { id, due } of scheduled) {
      const [first] = at(id);
      expect(first, `${id} called`).toBeDefined();
      expect(first ?? 0, `${id} due at ${due}`).toBeGreaterThanOrEqual(due);
    }
    for (const id of long) expect(at(id), id).toHaveLength(1);
  }, 180_000);

  it('judges start-by deadlines by Redis: none expired early, none called late', async () => {
    const run = uniqueName('skewdl');
    const now = Date.now();
    // Called at once by a sound executor; the one 2 s ahead would think their deadline gone.
    const prompt = Array.from({ length: 6 }, (_, i) => ({ id: `${run}-p${i}`, deadline: now + 1_500 }));
    // One call per 500 ms of the key: the later ones start past their deadline, which the
    // executor 2 s behind would think still ahead; each must expire instead of being called.
    const limiter = { key: run, algorithm: 'sliding-window-log', rates: [{ duration: '500ms', value: 1 }] };
    const limited = Array.from({ length: 8 }, (_, i) => ({ id: `${run}-l${i}`, deadline: now + 1_500 }));
    await producer.send(
      stack.config.topicIn,
      [...prompt.map((t) => ({ ...t })), ...limited.map((t) => ({ ...t, limiter }))].map(
        ({ id, deadline, ...meta }) => ({
          key: id,
          value: JSON.stringify({
            request: { uri: `${target.url}/${id}` },
            meta: { requestId: id, deadline: new Date(deadline).toISOString(), ...meta },
          }),
        }),
      ),
    );
    const all = [...prompt, ...limited];
    await results.until(() => all.every(({ id }) => results.byId.has(id)), 60_000, `${all.length} results`);

    const arrivals = (await target.arrivals()).filter((a) => a.path.startsWith(`/${run}-`));
    const calledAt = (id: string) => arrivals.filter((a) => a.path === `/${id}`).map((a) => a.at);
    let expired = 0;
    for (const { id, deadline } of all) {
      const [result] = results.byId.get(id) ?? [];
      if (result?.meta.error?.code === 'expired') {
        expired++;
        expect(calledAt(id), `${id} expired, never called`).toEqual([]);
      } else expect(result, id).toMatchObject({ response: { status: 200 } });
      for (const at of calledAt(id))
        expect(at, `${id} called after its deadline ${deadline}`).toBeLessThanOrEqual(
          deadline + LATE_TOLERANCE_MS,
        );
    }
    // Read here after the executor wrote it: an `expired` read before the deadline was judged early.
    for (const { id, deadline } of prompt)
      if (results.byId.get(id)?.[0]?.meta.error?.code === 'expired')
        expect(results.firstReadAt.get(id), `${id} expired before ${deadline}`).toBeGreaterThanOrEqual(
          deadline,
        );
    // The key's limit lets at most 4 of its 8 calls start before the deadline.
    expect(expired).toBeGreaterThanOrEqual(4);
  }, 90_000);
});
