import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { QueueAdmin, queueFromConfig } from '@requester/queue';
import { createRedis, Dependencies } from '@requester/shared';
import {
  type CountingTarget,
  consumeEach,
  eventually,
  freePort,
  silentLogger,
  startCountingTarget,
  testKafka,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningProcess, startProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import { callsByExecutor } from './arrival.fixture.ts';
import {
  dropStackDatabase,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  waitReady,
} from './stack.fixture.ts';

/**
 * Concurrency keys (`meta.concurrency`) across executor processes: three `requester --role
 * executor` processes of their own (not three executors in one process) share one Redis, and a
 * target in this process counts the calls of each key in flight as they arrive and end. The most
 * it ever sees of a key is what the limit promises, measured where it matters; the count drops
 * before the answer is written, so it never lags behind a slot the executor frees.
 *
 * The default run is short (1,200 calls over 6 keys). `CONC3_TASKS` and `CONC3_KEYS` set the
 * number of calls and of keys: issue 45's target, 10,000 calls over 100 keys, is
 * `CONC3_TASKS=10000 CONC3_KEYS=100 pnpm vitest run packages/requester/test/e2e/concurrency-processes.test.ts`
 * (its outcome in docs/benchmarks/executor.md, "Concurrency keys across three processes").
 * `CONC3_DEADLINE_MS` bounds the wait for the results (shorter while hunting a stall).
 */

const TASKS = Number(process.env.CONC3_TASKS ?? 1_200);
const DEADLINE_MS = Number(process.env.CONC3_DEADLINE_MS ?? 600_000);
const KEYS = Number(process.env.CONC3_KEYS ?? 6);
/** Limits 1, 2 and 3 over the keys: 12 slots in all against 3 × 8 workers, so keys fill up. */
const limitOf = (key: number) => 1 + (key % 3);

/** The sum of a counter over an executor's /metrics. */
async function counter(adminUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

describe('concurrency keys across three executor processes', () => {
  let stack: StackEnv;
  let front: RunningProcess | undefined;
  let target: CountingTarget;
  let results: ResultCollector;
  const executors: Array<{ child: ChildProcess; adminUrl: string; log: () => string }> = [];

  beforeAll(async () => {
    target = await startCountingTarget(10);
    // The origin's own cap out of the way (one target origin takes every call here): the keys'
    // limits are what is measured, not the bulkhead's per-process cap of that origin.
    stack = await stackEnv({
      MAX_WORKERS: '8',
      MAX_WORKERS_PER_ORIGIN: '8',
      ADAPTIVE_CONCURRENCY: 'false',
      LOG_LEVEL: 'warn',
    });
    // The door, the router and the relay here; the executors in processes of their own. The relay
    // belongs to the topology: a slot wait longer than REDIS_HORIZON (a refusal's re-check under
    // load, when the task cannot park) is written to the outbox, and only a relay brings it back.
    front = await startProcess(['ingress', 'router', 'relay'], stack.config, silentLogger);
    await waitReady(stack, 120_000);
    for (let i = 0; i < 3; i++) {
      const adminPort = await freePort();
      const started = requester(['--role', 'executor'], { ...stack.env, ADMIN_PORT: String(adminPort) });
      let err = '';
      started.child.stderr?.on('data', (d) => {
        err = `${err}${d}`.slice(-4_000);
      });
      executors.push({ child: started.child, adminUrl: `http://127.0.0.1:${adminPort}`, log: () => err });
    }
    for (const executor of executors)
      await eventually(
        () =>
          fetch(`${executor.adminUrl}/readyz`).then(
            (r) => r.status === 200,
            () => false,
          ),
        300_000,
        `executor at ${executor.adminUrl} ready`,
        executor.log,
      );
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
  }, 600_000);

  afterAll(async () => {
    await results?.stop();
    await Promise.all(
      executors.map(async ({ child }) => {
        if (child.exitCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        await exited;
      }),
    );
    await front?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 120_000);

  it(`${TASKS} calls over ${KEYS} keys: never more of a key in flight at the target than its limit`, async () => {
    const key = await stackKey(stack);
    const run = uniqueName('conc3');
    const ids = Array.from({ length: TASKS }, (_, i) => `${run}-${i}`);
    for (let from = 0; from < TASKS; from += 100)
      await Promise.all(
        ids.slice(from, from + 100).map(async (requestId, j) => {
          const k = (from + j) % KEYS;
          const reply = await fetch(`${stack.httpUrl}/request`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...key.headers },
            body: JSON.stringify({
              request: { uri: `${target.url}/call?key=${run}-${k}&id=${requestId}` },
              meta: { requestId, concurrency: { key: `${run}-${k}`, limit: limitOf(k) } },
            }),
          });
          expect(reply.status).toBe(202);
        }),
      );
    const sent = Date.now();
    await results
      .until(() => ids.every((id) => results.byId.has(id)), DEADLINE_MS, `${TASKS} results`)
      .catch(async (err: unknown) => {
        // What the executors hold and wait for, and which requests are missing, before failing.
        const missing = ids.filter((id) => !results.byId.has(id));
        const keysOf = missing.map((id) => Number(id.slice(id.lastIndexOf('-') + 1)) % KEYS);
        const gauges = await Promise.all(
          executors.map(async ({ adminUrl }) =>
            (await (await fetch(`${adminUrl}/metrics`)).text())
              .split('\n')
              .filter((l) =>
                /^requester_(executor_parked_tasks|executor_in_flight|concurrency_waiting)/.test(l),
              )
              .join('; '),
          ),
        );
        const redis = createRedis({ url: stack.config.redisUrl });
        // Each key's slots in Redis (lease id → deadline): who holds them, and until when.
        const zsets = await redis.keys(`${stack.config.redisPrefix}:concurrency:*`);
        const slots = await Promise.all(
          zsets.map(async (zset) => {
            const held = await redis.zrange(zset, 0, -1, 'WITHSCORES');
            return `${zset}: [${held.join(' ')}] ttl ${await redis.pttl(zset)}`;
          }),
        );
        const queue = await new QueueAdmin(queueFromConfig(stack.config, redis, { notify: false }))
          .info()
          .finally(() => redis.disconnect());
        // A second reader of `out` from its start: were the missing results written at all?
        const again = new ResultCollector(stack.config.topicOut);
        await again.start();
        await again
          .until(() => again.byId.size >= results.byId.size, 60_000, 'out read again')
          .catch(() => undefined);
        await new Promise((r) => setTimeout(r, 5_000));
        await again.stop();
        console.info(
          `target served ${target.served()}; collector ${results.byId.size}; out read again ${again.byId.size}, missing there ${missing.filter((id) => !again.byId.has(id)).length}`,
        );
        // The journal of each missing request: the steps it went through.
        const journal = testKafka().consumer({ groupId: uniqueName('journal') });
        const steps: string[] = [];
        let events = 0;
        await consumeEach(journal, stack.config.topicEvents, (record) => {
          events++;
          const event = JSON.parse(record.value?.toString() ?? 'null') as { requestId?: string };
          if (event?.requestId && missing.includes(event.requestId)) steps.push(JSON.stringify(event));
        });
        // And `in`: did the door write them at all?
        const door = testKafka().consumer({ groupId: uniqueName('in') });
        let ins = 0;
        const inMissing = new Set<string>();
        await consumeEach(door, stack.config.topicIn, (record) => {
          ins++;
          const text = record.value?.toString() ?? '';
          for (const id of missing) if (text.includes(`"${id}"`)) inMissing.add(id);
        });
        await new Promise((r) => setTimeout(r, 15_000));
        await journal.stop();
        await door.stop();
        // Waits beyond REDIS_HORIZON leave Redis for the outbox, which only a relay moves back.
        const deps = new Dependencies(stack.config, silentLogger);
        const rows = await (await deps.sql())`select request_id, due_at from outbox`.finally(() =>
          deps.close(),
        );
        console.info(
          `outbox rows ${rows.length}: ${rows.map((r) => `${r.request_id}@${String(r.due_at)}`).join(', ')}`,
        );
        console.info(`in records ${ins}; missing found in in: ${[...inMissing].join(', ')}`);
        const twice = [...results.byId].filter(([, r]) => r.length > 1);
        console.info(
          `journal events ${events}; of the missing:\n${steps.join('\n')}\nresults more than once: ${twice.map(([id, r]) => `${id} ×${r.length} ${r.map((x) => JSON.stringify(x.meta)).join(' / ')}`).join('; ')}`,
        );
        for (const { log } of executors) console.info(`executor stderr: ${log().slice(-1_500)}`);
        console.info(
          `missing ${missing.join(', ')} (keys ${keysOf.join(', ')}); queue ${JSON.stringify(queue.totals)}; ${gauges.join(' | ')}; redis now ${Date.now()}; slots ${slots.join('; ')}`,
        );
        throw err;
      });
    const tookMs = Date.now() - sent;
    for (const id of ids) expect(results.byId.get(id)?.map((r) => r.response.status)).toEqual([200]);
    expect(target.served()).toBe(TASKS);
    const adminUrls = executors.map((e) => e.adminUrl);
    const calls = await callsByExecutor(adminUrls, target.port);
    const waits = await Promise.all(
      adminUrls.map((url) => counter(url, 'requester_concurrency_waits_total')),
    );
    const most = Array.from({ length: KEYS }, (_, k) => target.most.get(`${run}-${k}`) ?? 0);
    console.info(
      `${TASKS} results in ${tookMs} ms; calls by executor process ${calls.join(', ')}; concurrency waits ${waits.join(', ')}; most in flight per key ${most.join(', ')} (limits ${most.map((_, k) => limitOf(k)).join(', ')})`,
    );
    // The processes shared the work, and the keys were full enough that calls waited.
    expect(calls.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
    expect(waits.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    for (let k = 0; k < KEYS; k++) expect(most[k]).toBeLessThanOrEqual(limitOf(k));
  }, 900_000);
});
