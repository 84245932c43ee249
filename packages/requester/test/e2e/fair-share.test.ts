import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type FairQueue, QueueAdmin, queueFromConfig } from '@requester/queue';
import { createRedis, type RedisClient } from '@requester/shared';
import { eventually, freePort, startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  postRequest,
  ResultCollector,
  type StackEnv,
  spawnRequester,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

type Key = Awaited<ReturnType<typeof stackKey>>;

/**
 * Fair share between clients (issue 21; docs/architecture.md §6), through HTTP. The executor (a
 * process of its own) is stopped while the backlogs below are queued, so that all are in the
 * queue before anything is leased; then it starts again, and the order in which the target was
 * called (each request's id is in its path) says who was served first. Assertions are on that
 * order, never on time. (The order of results on `out` is not it: `out` has several partitions,
 * read independently.)
 *
 * Backlogs are 1,000 tasks (the scenario has 50,000: the same ordering, too long for one
 * test on a shared 2-core machine where every request is an HTTP POST; the benchmark measures B's
 * wait at 10k and 100k).
 */
const WORKERS = 4;
const BACKLOG = 1_000;

/**
 * A target that counts the calls it holds at once: each call waits until the test answers it
 * (`answerOne`), so "never more than N at once" is checked on the target's own count, not on time.
 */
async function startCountingTarget() {
  let inFlight = 0;
  let most = 0;
  let calls = 0;
  const waiting: ServerResponse[] = [];
  const server = createServer((req, res) => {
    req.resume();
    calls++;
    inFlight++;
    most = Math.max(most, inFlight);
    waiting.push(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    inFlight: () => inFlight,
    most: () => most,
    calls: () => calls,
    /** Answers the call held longest; false when none is held. */
    answerOne(): boolean {
      const res = waiting.shift();
      if (!res) return false;
      inFlight--;
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('fair share between clients', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  /** The executor, a process of its own: stopped while a test queues its backlogs. */
  let executor: ReturnType<typeof spawnRequester> | undefined;
  let results: ResultCollector;
  let target: Target;
  let redis: RedisClient;
  let queue: FairQueue;

  beforeAll(async () => {
    stack = await stackEnv({
      MAX_WORKERS: String(WORKERS),
      MAX_WORKERS_PER_ORIGIN: String(WORKERS),
      // the held calls must outlast the posting of the backlogs (slow on a loaded machine)
      TARGET_RESPONSE_TIMEOUT: '15m',
    });
    target = await startTarget();
    running = await startStack(stack, ['ingress', 'sync-gateway', 'router', 'relay']);
    await waitReady(stack);
    await startExecutor();
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    redis = createRedis({ url: stack.config.redisUrl });
    queue = queueFromConfig(stack.config, redis, { notify: false });
  }, 120_000);

  afterAll(async () => {
    await results?.stop();
    await stopExecutor();
    await running?.shutdown('test over');
    await queue?.close();
    redis?.disconnect();
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  /** Async requests to the fast target (or `uri(id)`), `concurrency` POSTs at a time; their requestIds. */
  async function send(
    key: Key,
    count: number,
    tag: string,
    concurrency = 32,
    uri = (id: string) => `${target.url}/fast/${id}`,
  ): Promise<string[]> {
    const ids = Array.from({ length: count }, (_, i) => `${tag}-${i}`);
    let next = 0;
    const poster = async () => {
      while (next < ids.length) {
        const id = ids[next++] as string;
        const reply = await postRequest(`${stack.httpUrl}/request`, {
          method: 'POST',
          headers: { ...key.headers, 'content-type': 'application/json' },
          body: JSON.stringify({ request: { uri: uri(id) }, meta: { requestId: id } }),
        });
        expect(reply.status).toBe(202);
        await reply.arrayBuffer();
      }
    };
    await Promise.all(Array.from({ length: concurrency }, poster));
    return ids;
  }

  /**
   * The backlogs are queued while no executor runs, so that the order of service is the queue's
   * alone: held workers would not do, as the worker pool lets another client borrow a worker then.
   */
  async function stopExecutor(): Promise<void> {
    if (!executor) return;
    executor.child.kill('SIGTERM');
    await executor.exited;
    executor = undefined;
  }

  async function startExecutor(): Promise<void> {
    const adminPort = await freePort();
    const own = { ...stack, env: { ...stack.env, ADMIN_PORT: String(adminPort) } };
    executor = spawnRequester(own, 'executor');
    await waitReady({ ...own, adminUrl: `http://127.0.0.1:${adminPort}` }, 120_000);
  }

  let depth = 0;
  const queued = (count: number) =>
    eventually(
      async () => {
        depth = await queue.pendingDepth();
        return depth >= count;
      },
      300_000,
      `${count} tasks queued`,
      () => `(${depth} queued)`,
    );

  /** The requestIds in the order the target was called (first call of each). */
  const callOrder = () => {
    const order: string[] = [];
    const seen = new Set<string>();
    for (const call of target.calls) {
      const id = call.path.split('/')[2] ?? '';
      if (!seen.has(id)) order.push(id);
      seen.add(id);
    }
    return order;
  };

  it("a client's backlog does not hold another client's requests: B completes before A's backlog drains", async () => {
    const [a, b] = [await stackKey(stack), await stackKey(stack)];
    await stopExecutor();
    let aIds: string[];
    let bIds: string[];
    try {
      aIds = await send(a, BACKLOG, uniqueName('A'));
      await queued(BACKLOG);
      // B arrives last, behind every one of A's tasks (each a partition of its own).
      bIds = await send(b, 10, uniqueName('B'), 1);
      await queued(BACKLOG + 10);
    } finally {
      await startExecutor();
    }
    await results.until(() => bIds.every((id) => results.byId.has(id)), 300_000, "B's results");
    await results.until(() => aIds.every((id) => results.byId.has(id)), 300_000, "A's results");

    const order = new Map(callOrder().map((id, at) => [id, at]));
    const bLast = Math.max(...bIds.map((id) => order.get(id) as number));
    const aBefore = aIds.filter((id) => (order.get(id) as number) < bLast).length;
    // Fair share: B's tasks are served at the next turn in their shards (visited first once B's
    // arrival is announced); a shard holding several of B's tasks gives one per turn, between
    // A's, so some of A's calls come first: 101 to 258 seen on 2 cores, depending on how the
    // workers' lease batches fall. Without fair share B waited for the whole of A's backlog
    // (aBefore = BACKLOG); half of it is the line between the two.
    expect(aBefore, `A's calls before B's last (of ${BACKLOG})`).toBeLessThan(BACKLOG / 2);
  }, 600_000);

  it('weights 3:1 give 3:1 completions (±10%) while both clients have a backlog', async () => {
    const [heavy, light] = [await stackKey(stack, { weight: 3 }), await stackKey(stack)];
    // What `requester keys create --weight 3` does besides storing it with the key.
    await queue.setClientWeight(heavy.name, 3);
    await stopExecutor();
    let heavyIds: string[];
    let lightIds: string[];
    try {
      const before = await queue.pendingDepth();
      [heavyIds, lightIds] = await Promise.all([
        send(heavy, BACKLOG, uniqueName('H'), 16),
        send(light, BACKLOG, uniqueName('L'), 16),
      ]);
      await queued(before + 2 * BACKLOG);
    } finally {
      await startExecutor();
    }
    // Measured while both clients have a backlog in nearly every shard. Shares are kept per shard
    // (a shard's lease serves its own clients' turns), and each client has only BACKLOG / shards
    // tasks in a shard: once the heavy one has used most of them, shards that ran out of its tasks
    // serve the light one alone. Over the first BACKLOG completions (3/4 of the heavy backlog) that
    // drift took the ratio to 2.0 once (2.9 at 500 in the same run); over the first half of it the
    // heavy client has used 3/8 of its tasks.
    const window = BACKLOG / 2;
    const heavySet = new Set(heavyIds);
    const lightSet = new Set(lightIds);
    const served = () => {
      let h = 0;
      let l = 0;
      for (const id of callOrder()) {
        if (heavySet.has(id)) h++;
        else if (lightSet.has(id)) l++;
        if (h + l >= window) break;
      }
      return { h, l };
    };
    await eventually(
      () => {
        const { h, l } = served();
        return h + l >= window;
      },
      300_000,
      `${window} calls of the two clients`,
    );
    const { h, l } = served();
    // How the ratio built up (the first calls of each shard alternate: whoever joined a shard's fair
    // share second is served first there, so the light client leads by up to a task per shard).
    const order = callOrder().filter((id) => heavySet.has(id) || lightSet.has(id));
    const buildUp = [100, 250, window].map((n) => {
      const heavyIn = order.slice(0, n).filter((id) => heavySet.has(id)).length;
      return `${n}: ${heavyIn}/${Math.min(n, order.length) - heavyIn}`;
    });
    const measured = `heavy ${h}, light ${l} (heavy/light after ${buildUp.join(', ')})`;
    expect(h / l, measured).toBeGreaterThanOrEqual(2.7);
    expect(h / l, measured).toBeLessThanOrEqual(3.3);
  }, 600_000);

  it('a client capped at 2 in flight never has more than 2 calls at its target, and B completes meanwhile', async () => {
    const counting = await startCountingTarget();
    try {
      const [a, b] = [await stackKey(stack, { maxInFlight: 2 }), await stackKey(stack)];
      // What `requester keys create --max-in-flight 2` does besides storing it with the key.
      await queue.setClientMaxInFlight(a.name, 2);
      const aIds = await send(a, 12, uniqueName('capA'), 4, (id) => `${counting.url}/a/${id}`);
      // A holds its 2 slots (the target answers nothing yet); its other 10 tasks wait in the queue
      // although 2 of the 4 workers are free.
      await eventually(() => counting.inFlight() === 2, 120_000, 'A at its cap at the target');
      const admin = new QueueAdmin(queue);
      const capped = (await admin.clients()).find((c) => c.client === a.name);
      expect(capped).toMatchObject({ maxInFlight: 2, inFlight: 2, pending: 10 });

      // B's requests are served by the free workers while A's backlog waits.
      const bIds = await send(b, 10, uniqueName('capB'), 2);
      await results.until(() => bIds.every((id) => results.byId.has(id)), 300_000, "B's results");
      expect(aIds.filter((id) => results.byId.has(id))).toEqual([]);
      expect(counting.calls()).toBe(2);

      // Each answer frees a slot: the next of A's tasks is called, never a third at once.
      for (let answered = 0; answered < aIds.length; answered++) {
        await eventually(
          () => counting.inFlight() === Math.min(2, aIds.length - answered),
          120_000,
          `A's call ${answered + 1} held`,
        );
        expect(counting.answerOne()).toBe(true);
      }
      await results.until(() => aIds.every((id) => results.byId.has(id)), 300_000, "A's results");
      expect(counting.most(), 'most of A’s calls at once').toBe(2);
      expect(counting.calls()).toBe(aIds.length);
      // A result reaches `out` before its task is acked (and its cap slot given back): wait for it.
      await expect
        .poll(async () => (await admin.clients()).find((c) => c.client === a.name)?.inFlight, {
          timeout: 60_000,
          interval: 200,
        })
        .toBe(0);
    } finally {
      await counting.close();
    }
  }, 600_000);
});
