import path from 'node:path';
import { type KafkaProducer, loadConfig } from '@requester/shared';
import { silentLogger, uniqueName } from '@requester/shared/testing';
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
 * Two executors whose clocks are 2 s ahead and 2 s behind (docs/reliability.md): the queue, the
 * limiter and the leases take their time from Redis, so a limit still holds by arrival at a real
 * target (its own process, true clock), no scheduled task is called early by the target's clock,
 * and calls that outlive several lease periods are called once.
 */
describe(`executors with clocks ${SKEW_MS} ms ahead and behind`, () => {
  let stack: StackEnv;
  let front: RunningProcess;
  const executors: Array<ReturnType<typeof spawnRequester>> = [];
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
      const env = {
        ...stack.env,
        ADMIN_PORT: '0',
        HTTP_PORT: '0',
        CLOCK_SKEW_MS: String(skew),
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${SKEWED_CLOCK}`,
        KAFKA_CLIENT_ID: `${stack.name}-x${i}`,
      };
      executors.push(spawnRequester({ ...stack, env, config: loadConfig(env) }, 'executor'));
    }
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
});
