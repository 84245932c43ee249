/**
 * Model-based tests: random interleavings of publish / lease / ack / reject / dead-letter / crash
 * (expired leases) / retry by several simulated workers, each step checked against a small
 * in-memory model, and the queue's own consistency check (`verify`) run after every step.
 *
 * Due times are either "now" or "far" (an hour away), so that what may be leased is known exactly
 * without depending on timing. Partitions belong to clients (`<name> @<client>`, or none) whose
 * weights and caps of tasks in flight change at random, so that `verify` also checks the fair-share
 * structures throughout and no lease ever takes a client beyond its cap; a second property checks
 * the shares themselves.
 */
import { createRedis, type RedisClient } from '@requester/shared/redis';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expireCapSlots, expireLeases, uniquePrefix } from '../test/queue.fixture.ts';
import { QueueAdmin } from './admin.ts';
import { clientOfPartition, FairQueue, type LeasedTask } from './index.ts';

const FAR_MS = 3_600_000;
const PARTITIONS = ['!a', '!b @x', '!c @y', 'u1', 'u2 @x', 'u3 @y', 'u4 @x'] as const;
const CLIENTS = ['x', 'y'] as const;
const WORKERS = 3;

type State = 'pending' | 'leased' | 'dead' | 'acked';

interface ModelTask {
  id: string;
  partition: string;
  /** Arrival order within the queue (ordered partitions are FIFO by it). */
  seq: number;
  far: boolean;
  state: State;
  deliveries: number;
  token?: string;
  /** Leased while its client had a cap: the lease holds one of its cap slots. */
  slot?: boolean;
}

interface Model {
  tasks: Map<string, ModelTask>;
  nextId: number;
  nextSeq: number;
  /** Tokens each worker holds, live or stale. */
  held: string[][];
  /** Tokens known to be stale (settled or reclaimed). */
  stale: Set<string>;
  /** Clients with a cap of tasks in flight. */
  caps: Map<string, number>;
}

interface Real {
  workers: FairQueue[];
  admin: QueueAdmin;
}

const isOrdered = (partition: string) => partition.startsWith('!');

/** The task an ordered partition must hand out next, if any. */
function orderedHead(model: Model, partition: string): ModelTask | undefined {
  let head: ModelTask | undefined;
  for (const task of model.tasks.values()) {
    if (task.partition !== partition) continue;
    if (task.state === 'leased') return undefined; // locked
    if (task.state === 'pending' && (!head || task.seq < head.seq)) head = task;
  }
  return head && !head.far ? head : undefined;
}

/** The cap slots a client's leases hold. */
function slotsHeld(model: Model, client: string): number {
  let held = 0;
  for (const t of model.tasks.values()) {
    if (t.state === 'leased' && t.slot && clientOfPartition(t.partition) === client) held++;
  }
  return held;
}

/** Tasks a lease could take now; `withCapped` false leaves out clients with a cap. */
function leasableCount(model: Model, withCapped = true): number {
  const perClient = new Map<string, number>();
  for (const partition of PARTITIONS) {
    const client = clientOfPartition(partition);
    let count = 0;
    if (isOrdered(partition)) count += orderedHead(model, partition) ? 1 : 0;
    else {
      for (const t of model.tasks.values()) {
        if (t.partition === partition && t.state === 'pending' && !t.far) count++;
      }
    }
    perClient.set(client, (perClient.get(client) ?? 0) + count);
  }
  let total = 0;
  for (const [client, count] of perClient) {
    const cap = model.caps.get(client);
    if (cap === undefined) total += count;
    else if (withCapped) total += Math.min(count, Math.max(0, cap - slotsHeld(model, client)));
  }
  return total;
}

/** Checks one lease round (possibly several workers at once) against the model, then applies it. */
function applyLeases(model: Model, rounds: Array<{ worker: number; tasks: LeasedTask[] }>): void {
  const all = rounds.flatMap((r) => r.tasks);
  // Workers leasing at once may each take a capped client's slots for shards where its work is no
  // longer, leaving none to the one that meets it (under-use, never excess): liveness is checked
  // for capped clients only when one worker leases.
  const leasable = leasableCount(model, rounds.length === 1);
  if (leasable > 0) expect(all.length).toBeGreaterThan(0);
  expect(new Set(all.map((t) => t.id)).size).toBe(all.length);
  const orderedSeen = new Set<string>();
  for (const leased of all) {
    const task = model.tasks.get(leased.id);
    expect(task, `leased unknown task ${leased.id}`).toBeDefined();
    if (!task) continue;
    expect(task.state, `task ${task.id} leased while ${task.state}`).toBe('pending');
    expect(task.far, `task ${task.id} leased before it was due`).toBe(false);
    expect(leased.partition).toBe(task.partition);
    expect(leased.deliveries).toBe(task.deliveries + 1);
    if (isOrdered(task.partition)) {
      expect(orderedSeen.has(task.partition), `two tasks of ${task.partition} in flight`).toBe(false);
      orderedSeen.add(task.partition);
      expect(orderedHead(model, task.partition)?.id, `ordered partition ${task.partition} reordered`).toBe(
        task.id,
      );
    }
  }
  // A lowered cap leaves the leases in flight alone: what counts is that none was added beyond it.
  const heldBefore = new Map([...model.caps.keys()].map((client) => [client, slotsHeld(model, client)]));
  for (const { worker, tasks } of rounds) {
    for (const leased of tasks) {
      const task = model.tasks.get(leased.id) as ModelTask;
      task.state = 'leased';
      task.deliveries++;
      task.token = leased.token;
      task.slot = model.caps.has(clientOfPartition(task.partition));
      model.held[worker]?.push(leased.token);
    }
  }
  for (const [client, cap] of model.caps) {
    const before = heldBefore.get(client) ?? 0;
    expect(slotsHeld(model, client), `client ${client} beyond its cap of ${cap}`).toBeLessThanOrEqual(
      Math.max(cap, before),
    );
  }
}

function liveTask(model: Model, token: string): ModelTask | undefined {
  for (const task of model.tasks.values()) if (task.state === 'leased' && task.token === token) return task;
  return undefined;
}

function release(model: Model, task: ModelTask): void {
  model.stale.add(task.token as string);
  task.token = undefined;
  task.slot = false;
}

/** After every step: the queue agrees with the model and with its own invariants. */
async function checkAgreement(model: Model, real: Real): Promise<void> {
  const { violations } = await real.admin.verify();
  expect(violations).toEqual([]);
  const count = (state: State) => [...model.tasks.values()].filter((t) => t.state === state).length;
  const { totals } = await real.admin.info();
  expect({ pending: totals.pending, inFlight: totals.inFlight, dead: totals.dead }).toEqual({
    pending: count('pending'),
    inFlight: count('leased'),
    dead: count('dead'),
  });
}

type Cmd = fc.AsyncCommand<Model, Real>;

class Publish implements Cmd {
  readonly partition: string;
  readonly n: number;
  readonly far: boolean;
  /** Of every task published (0: none given); priority reorders turns, never what may be leased. */
  readonly priority: number;
  constructor(partition: string, n: number, far: boolean, priority: number) {
    this.partition = partition;
    this.n = n;
    this.far = far;
    this.priority = priority;
  }
  check = () => true;
  async run(model: Model, real: Real) {
    const tasks = Array.from({ length: this.n }, () => ({
      id: `t${model.nextId++}`,
      partition: this.partition,
      payload: 'p',
      delayMs: this.far ? FAR_MS : 0,
      ...(this.priority === 0 ? {} : { priority: this.priority }),
    }));
    expect(await real.workers[0]?.publish(tasks)).toEqual(tasks.map(() => 'queued'));
    for (const t of tasks) {
      model.tasks.set(t.id, {
        id: t.id,
        partition: t.partition,
        seq: model.nextSeq++,
        far: this.far,
        state: 'pending',
        deliveries: 0,
      });
    }
    await checkAgreement(model, real);
  }
  toString = () =>
    `publish(${this.partition} x${this.n}${this.far ? ' far' : ''}${this.priority ? ` priority ${this.priority}` : ''})`;
}

class PublishDuplicate implements Cmd {
  readonly pick: number;
  constructor(pick: number) {
    this.pick = pick;
  }
  check = (model: Readonly<Model>) => model.tasks.size > 0;
  async run(model: Model, real: Real) {
    const known = [...model.tasks.values()];
    const task = known[this.pick % known.length] as ModelTask;
    // acked ids are refused too: the dedup window (24 h) outlives the test
    expect(
      await real.workers[1]?.publish([{ id: task.id, partition: task.partition, payload: 'p' }]),
    ).toEqual(['duplicate']);
    await checkAgreement(model, real);
  }
  toString = () => `publishDuplicate(${this.pick})`;
}

class Lease implements Cmd {
  readonly worker: number;
  readonly k: number;
  constructor(worker: number, k: number) {
    this.worker = worker;
    this.k = k;
  }
  check = () => true;
  async run(model: Model, real: Real) {
    const { tasks } = await (real.workers[this.worker] as FairQueue).lease(this.k, 60_000);
    expect(tasks.length).toBeLessThanOrEqual(this.k);
    applyLeases(model, [{ worker: this.worker, tasks }]);
    await checkAgreement(model, real);
  }
  toString = () => `lease(w${this.worker}, ${this.k})`;
}

class LeaseConcurrently implements Cmd {
  readonly k: number;
  constructor(k: number) {
    this.k = k;
  }
  check = () => true;
  async run(model: Model, real: Real) {
    const results = await Promise.all(real.workers.map((w) => w.lease(this.k, 60_000)));
    applyLeases(
      model,
      results.map((r, worker) => ({ worker, tasks: r.tasks })),
    );
    await checkAgreement(model, real);
  }
  toString = () => `leaseConcurrently(${this.k})`;
}

type SettleOp = 'ack' | 'rejectNow' | 'rejectFar' | 'deadLetter' | 'extend';

class Settle implements Cmd {
  readonly worker: number;
  readonly pick: number;
  readonly op: SettleOp;
  constructor(worker: number, pick: number, op: SettleOp) {
    this.worker = worker;
    this.pick = pick;
    this.op = op;
  }
  check = (model: Readonly<Model>) => (model.held[this.worker]?.length ?? 0) > 0;
  async run(model: Model, real: Real) {
    const held = model.held[this.worker] as string[];
    const token = held[this.pick % held.length] as string;
    const queue = real.workers[this.worker] as FairQueue;
    const task = liveTask(model, token);
    const result =
      this.op === 'ack'
        ? await queue.ack(token)
        : this.op === 'rejectNow'
          ? await queue.reject(token, 0)
          : this.op === 'rejectFar'
            ? await queue.reject(token, FAR_MS)
            : this.op === 'deadLetter'
              ? await queue.deadLetter(token, 'model')
              : await queue.extend(token, 60_000);
    expect(result).toBe(task ? 'ok' : 'stale');
    if (task && this.op !== 'extend') {
      release(model, task);
      held.splice(held.indexOf(token), 1);
      if (this.op === 'ack') task.state = 'acked';
      else if (this.op === 'deadLetter') task.state = 'dead';
      else {
        task.state = 'pending';
        task.far = this.op === 'rejectFar';
      }
    }
    await checkAgreement(model, real);
  }
  toString = () => `${this.op}(w${this.worker}, ${this.pick})`;
}

/** The worker dies: its leases expire and are reclaimed; its tokens become stale. */
class Crash implements Cmd {
  readonly worker: number;
  constructor(worker: number) {
    this.worker = worker;
  }
  check = (model: Readonly<Model>) => (model.held[this.worker]?.length ?? 0) > 0;
  async run(model: Model, real: Real) {
    const held = model.held[this.worker] as string[];
    const live = held.map((token) => liveTask(model, token)).filter((t) => t !== undefined);
    await expireLeases(real.workers[0] as FairQueue, held);
    await expireCapSlots(real.workers[this.worker] as FairQueue, held);
    const { reclaimed } = await (real.workers[(this.worker + 1) % WORKERS] as FairQueue).reclaim();
    expect(reclaimed).toBe(live.length);
    for (const task of live) {
      release(model, task);
      task.state = 'pending';
    }
    await checkAgreement(model, real);
  }
  toString = () => `crash(w${this.worker})`;
}

class SetWeight implements Cmd {
  readonly client: string;
  readonly weight: number;
  constructor(client: string, weight: number) {
    this.client = client;
    this.weight = weight;
  }
  check = () => true;
  async run(model: Model, real: Real) {
    await real.workers[2]?.setClientWeight(this.client, this.weight);
    await checkAgreement(model, real);
  }
  toString = () => `setWeight(${this.client}, ${this.weight})`;
}

class SetCap implements Cmd {
  readonly client: string;
  readonly cap: number;
  constructor(client: string, cap: number) {
    this.client = client;
    this.cap = cap;
  }
  check = () => true;
  async run(model: Model, real: Real) {
    await real.workers[1]?.setClientMaxInFlight(this.client, this.cap);
    if (this.cap === 0) model.caps.delete(this.client);
    else model.caps.set(this.client, this.cap);
    // A lowered cap leaves the tasks in flight alone; slots held count against the new one.
    await checkAgreement(model, real);
  }
  toString = () => `setCap(${this.client}, ${this.cap})`;
}

class RetryDead implements Cmd {
  check = (model: Readonly<Model>) => [...model.tasks.values()].some((t) => t.state === 'dead');
  async run(model: Model, real: Real) {
    const dead = [...model.tasks.values()].filter((t) => t.state === 'dead');
    expect(await real.admin.retryDead('all')).toEqual({ retried: dead.length });
    // retried tasks re-enter as new arrivals (at the tail), keeping their relative order
    for (const task of dead.sort((x, y) => x.seq - y.seq)) {
      task.state = 'pending';
      task.seq = model.nextSeq++;
      task.far = false;
      task.deliveries = 0;
    }
    await checkAgreement(model, real);
  }
  toString = () => 'retryDead(all)';
}

const commands = [
  fc
    .tuple(
      fc.constantFrom(...PARTITIONS),
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 0, max: 9 }).map((x) => x < 2),
      fc.oneof(fc.constant(0), fc.integer({ min: -10, max: 10 })),
    )
    .map(([p, n, far, priority]) => new Publish(p, n, far, priority)),
  fc.nat().map((pick) => new PublishDuplicate(pick)),
  fc.tuple(fc.nat({ max: WORKERS - 1 }), fc.integer({ min: 1, max: 5 })).map(([w, k]) => new Lease(w, k)),
  fc.integer({ min: 1, max: 3 }).map((k) => new LeaseConcurrently(k)),
  fc
    .tuple(
      fc.nat({ max: WORKERS - 1 }),
      fc.nat(),
      fc.constantFrom<SettleOp>('ack', 'ack', 'ack', 'rejectNow', 'rejectFar', 'deadLetter', 'extend'),
    )
    .map(([w, pick, op]) => new Settle(w, pick, op)),
  fc.nat({ max: WORKERS - 1 }).map((w) => new Crash(w)),
  fc.constant(new RetryDead()),
  fc
    .tuple(fc.constantFrom(...CLIENTS), fc.integer({ min: 1, max: 4 }))
    .map(([client, weight]) => new SetWeight(client, weight)),
  fc
    .tuple(fc.constantFrom(...CLIENTS), fc.integer({ min: 0, max: 3 }))
    .map(([client, cap]) => new SetCap(client, cap)),
];

describe('FairQueue against a model', () => {
  let redis: RedisClient;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  });
  afterAll(() => redis.disconnect());

  it('never loses, duplicates or reorders tasks under random interleavings of several workers', async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 60, size: 'large' }), async (cmds) => {
        const prefix = uniquePrefix();
        // Several workers = several queue objects (own shard views and cursors) on one prefix.
        const workers = Array.from(
          { length: WORKERS },
          () => new FairQueue({ redis, prefix, shards: 4, refreshMs: 0, notify: false }),
        );
        const admin = new QueueAdmin(workers[0] as FairQueue);
        const model: Model = {
          tasks: new Map(),
          nextId: 0,
          nextSeq: 0,
          held: workers.map(() => []),
          stale: new Set(),
          caps: new Map(),
        };
        try {
          await fc.asyncModelRun(() => ({ model, real: { workers, admin } }), cmds);
        } finally {
          await admin.destroy();
        }
      }),
      { numRuns: 150 },
    );
  });

  it('shares leases between saturated clients by weight, and serves a newcomer next', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 2, maxLength: 4 }),
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 8 }),
        async (weights, asks) => {
          const prefix = uniquePrefix();
          // One shard: the shares are per shard (README, "Fair share between clients").
          const queue = new FairQueue({ redis, prefix, shards: 1, refreshMs: 0, notify: false });
          const admin = new QueueAdmin(queue);
          const clients = weights.map((_, i) => `c${i}`);
          try {
            for (const [i, client] of clients.entries()) {
              await queue.setClientWeight(client, weights[i] as number);
            }
            // Every client saturates: more tasks each (one partition each) than the test leases.
            const perClient = 6 * asks.reduce((sum, k) => sum + k, 0);
            for (const client of clients) {
              await queue.publish(
                Array.from({ length: perClient }, (_, n) => ({
                  id: `${client}-${n} @${client}`,
                  payload: 'p',
                })),
              );
            }
            const served = new Map(clients.map((c) => [c, 0]));
            const check = () => {
              // Start-time fair queuing: two saturated clients' normalised service never differs
              // by more than one task of each.
              for (const [i, a] of clients.entries()) {
                for (const [j, b] of clients.entries()) {
                  const wa = weights[i] as number;
                  const wb = weights[j] as number;
                  const lag = (served.get(a) ?? 0) / wa - (served.get(b) ?? 0) / wb;
                  expect(
                    lag,
                    `${a} (w${wa}) vs ${b} (w${wb}): ${JSON.stringify([...served])}`,
                  ).toBeLessThanOrEqual(1 / wa + 1 / wb + 1e-9);
                }
              }
            };
            for (let round = 0; round < 6; round++) {
              for (const k of asks) {
                const { tasks } = await queue.lease(k, 60_000);
                expect(tasks).toHaveLength(k);
                for (const task of tasks) {
                  const client = clientOfPartition(task.partition);
                  served.set(client, (served.get(client) ?? 0) + 1);
                }
                check();
              }
            }
            // A newcomer with one task is served by the next lease, ahead of every backlog.
            await queue.publish([{ id: 'late-1 @late', payload: 'p' }]);
            const { tasks } = await queue.lease(1, 60_000);
            expect(tasks.map((t) => t.id)).toEqual(['late-1 @late']);
            expect((await admin.verify()).violations).toEqual([]);
          } finally {
            await admin.destroy();
          }
        },
      ),
      { numRuns: 25 },
    );
  });
});
