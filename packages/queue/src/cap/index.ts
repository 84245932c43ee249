/**
 * Clients' caps of tasks in flight, counted across every shard and executor: the cap slots a lease
 * of a capped client must hold, taken in the client's own Redis slot before the lease and bound to
 * it until it settles. No shard can count a client's tasks (they are in every shard), hence this
 * second, per-client place (docs/architecture.md §6, "Per-client cap of tasks in flight").
 */
import type { RedisClient } from '@requester/shared/redis';
import { clientCapKeys, clientOfPartition, shardKey } from '../keys.ts';
import type { CapSlot, LeasedTask, TokenResult } from '../types.ts';
import { PROCESS_TAG } from '../wakes.ts';
import { type CapScripts, loadCapScripts } from './scripts.ts';

/**
 * A cap slot outlives its lease by this much (it is taken just before the lease and extended just
 * after it), so that a slot never expires while its lease is live: the cap is never exceeded; the
 * price is that a dead executor's slots come back this long after its leases expired.
 */
export const CAP_GRACE_MS = 2000;
/**
 * Cap slot ids are `<PROCESS_TAG>.<n>`, unique across processes; n counts for the whole process,
 * not per queue object, or two queue objects of one process (workers of `--role all`, tests) would
 * take the same slot twice.
 */
let permitSeq = 0;

/** Per shard of a wave: per capped client, the cap slots taken for it (maybe none). */
export type SlotsByShard = Map<number, Map<string, { permits: string[]; recorded: boolean }>>;

/** What one shard's lease reply means for the capped clients (`ClientCaps.afterLease`). */
export interface CapVisit {
  /** A capped client was skipped without having been asked for slots: worth a visit with slots. */
  skippedUnasked: boolean;
}

/**
 * One queue instance's side of the caps: its settings (written in every shard and in the client's
 * slot), the slots it takes for a lease and binds to the tasks, and what it learnt of which capped
 * clients wait in which shard.
 */
export class ClientCaps {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly shards: number;
  private readonly scripts: CapScripts;
  /**
   * Per shard, the capped clients known to wait there, in the order of their next turns as far as
   * this process saw (`noteWaiting`): the first ones get cap slots for the shard's next visit.
   */
  private readonly wanting = new Map<number, string[]>();
  /** The cap slots of the leases this instance handed out, by token (settled here, released here). */
  private readonly bound = new Map<string, CapSlot>();

  constructor(options: { redis: RedisClient; prefix: string; shards: number }) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.shards = options.shards;
    this.scripts = loadCapScripts(this.redis);
  }

  /**
   * A client's cap of tasks in flight across every executor (0: none). Written into every shard
   * (lease reads whether a client is capped in its own slot) and into the client's own slot, where
   * the slots are counted (`cap/commands/acquire-2.lua`): a shard is a slot of its own and a client's
   * partitions are in many, so no shard can count them. Lowering a cap leaves the tasks in flight
   * alone: the client gets no more until it is below the new one.
   */
  async setMaxInFlight(client: string, cap: number): Promise<void> {
    const { cap: capKey } = clientCapKeys(this.prefix, client);
    await Promise.all([
      cap === 0 ? this.redis.del(capKey) : this.redis.set(capKey, cap),
      ...Array.from({ length: this.shards }, (_, shard) => {
        const key = shardKey(this.prefix, shard, 'caps');
        return cap === 0 ? this.redis.hdel(key, client) : this.redis.hset(key, client, cap);
      }),
    ]);
  }

  /** The clients with a cap of tasks in flight (read from shard 0; every shard holds the same). */
  async caps(): Promise<Map<string, number>> {
    const all = await this.redis.hgetall(shardKey(this.prefix, 0, 'caps'));
    return new Map(Object.entries(all).map(([client, cap]) => [client, Number(cap)]));
  }

  /** The cap slots a client holds now: its tasks in flight, counted only for a capped client. */
  async inFlight(client: string): Promise<number> {
    return this.redis.zcount(clientCapKeys(this.prefix, client).held, `(${Date.now()}`, '+inf');
  }

  /** The cap slot this instance holds for a lease it handed out (a capped client's), if any. */
  slotOf(token: string): Readonly<CapSlot> | undefined {
    return this.bound.get(token);
  }

  /**
   * Cap slots for the capped clients known to wait in the shards of a wave (`wanting`), taken in
   * each client's slot (one acquire script per client, pipelined: the clients' slots are apart).
   * A client is asked only for the turns it may get in a shard: the shard's ask shared out between
   * the clients waiting there (at least the wave's quantum), to the first ones in turn order until
   * the ask is covered. A client with more due work, or one not asked, is skipped by the script
   * with its place kept, and reported: it gets slots at the next visit. Per shard: client → slots,
   * also for a client granted none; `recorded` false for a client whose cap was lifted meanwhile
   * (the shard still asks for slots until it sees the change: pseudo-slots, never released).
   */
  async take(asks: ReadonlyMap<number, number>, quantum: number, leaseMs: number): Promise<SlotsByShard> {
    const wants = new Map<string, Array<{ shard: number; count: number }>>();
    for (const [shard, ask] of asks) {
      const waiting = this.wanting.get(shard);
      if (!waiting || waiting.length === 0) continue;
      const each = Math.min(ask, Math.max(quantum, Math.ceil(ask / waiting.length)));
      let left = ask;
      for (const client of waiting) {
        if (left <= 0) break;
        const count = Math.min(each, left);
        left -= count;
        const list = wants.get(client);
        if (list) list.push({ shard, count });
        else wants.set(client, [{ shard, count }]);
      }
    }
    const byShard: SlotsByShard = new Map();
    await Promise.all(
      [...wants].map(async ([client, shards]) => {
        const need = shards.reduce((sum, { count }) => sum + count, 0);
        const ids = Array.from({ length: need }, () => `${PROCESS_TAG}.${++permitSeq}`);
        const granted = await this.scripts.acquire(
          clientCapKeys(this.prefix, client),
          leaseMs + CAP_GRACE_MS,
          ids,
        );
        const permits = granted === null ? ids : ids.slice(0, granted);
        // One slot at a time to each shard in turn, up to its count.
        const given = new Map<number, string[]>(shards.map(({ shard }) => [shard, []]));
        let at = 0;
        while (at < permits.length) {
          let placed = false;
          for (const { shard, count } of shards) {
            const mine = given.get(shard) as string[];
            if (at < permits.length && mine.length < count) {
              mine.push(permits[at++] as string);
              placed = true;
            }
          }
          if (!placed) break;
        }
        for (const [shard, mine] of given) {
          const perClient = byShard.get(shard) ?? new Map();
          perClient.set(client, { permits: mine, recorded: granted !== null });
          byShard.set(shard, perClient);
        }
      }),
    );
    return byShard;
  }

  /**
   * After a lease call on a shard that was given `given` slots: binds the slots used to the tasks'
   * tokens, collects the unused ones into `unused` (to give back), and notes which capped clients
   * wait there for the next visit.
   */
  afterLease(
    shard: number,
    reply: { tasks: readonly LeasedTask[]; wanting: readonly string[]; left: readonly string[] },
    given: ReadonlyMap<string, { permits: string[]; recorded: boolean }> | undefined,
    ask: number,
    unused: CapSlot[],
  ): CapVisit {
    // Asked, and granted no slot: at its cap (behind the others in this process's order).
    const denied = new Set<string>();
    for (const [client, { permits }] of given ?? []) if (permits.length === 0) denied.add(client);
    // Without cap slots for this shard (no capped client met), no task holds one: no name parsed.
    for (const task of given ? reply.tasks : []) {
      const client = clientOfPartition(task.partition);
      const mine = given?.get(client);
      const permit = mine?.permits.shift();
      if (permit !== undefined && mine?.recorded) this.bound.set(task.token, { client, permit });
    }
    for (const [client, { permits, recorded }] of given ?? []) {
      if (recorded) for (const permit of permits) unused.push({ client, permit });
    }
    const skippedUnasked = reply.wanting.some((client) => !given?.has(client));
    this.noteWaiting(shard, reply, given, denied, ask);
    return { skippedUnasked };
  }

  /**
   * After a lease call on a shard: the capped clients known to wait there, in the order of their
   * next turns. First those the script set work aside for, for want of slots (in turn order: they
   * were met at the front of the line), then the others known, then those served (their tags moved
   * on), and last those found at their caps (`denied`: asked first, they would take the ask from the
   * others every time). Out: those with nothing pending there any more, and, when the call took fewer tasks than
   * asked (it met every client in line), those given slots that it neither served nor skipped.
   */
  private noteWaiting(
    shard: number,
    reply: { tasks: readonly LeasedTask[]; wanting: readonly string[]; left: readonly string[] },
    given: ReadonlyMap<string, unknown> | undefined,
    denied: ReadonlySet<string>,
    ask: number,
  ): void {
    const known = this.wanting.get(shard) ?? [];
    if (known.length === 0 && reply.wanting.length === 0) return;
    const served = new Set<string>();
    if (given) {
      for (const task of reply.tasks) {
        const client = clientOfPartition(task.partition);
        if (given.has(client)) served.add(client);
      }
    }
    const out = new Set([...reply.wanting, ...reply.left]);
    const metAll = reply.tasks.length < ask;
    const next = reply.wanting.filter((client) => !denied.has(client));
    for (const client of known) {
      if (out.has(client) || served.has(client) || (metAll && given?.has(client))) continue;
      next.push(client);
    }
    for (const client of served) if (!out.has(client)) next.push(client);
    for (const client of reply.wanting) if (denied.has(client)) next.push(client);
    if (next.length > 0) this.wanting.set(shard, next);
    else this.wanting.delete(shard);
  }

  /**
   * The cap slots of leases after a script on their tokens: an extended lease extends its slot; a
   * settled one (ack, reject, deadLetter), or a stale token (its lease was reclaimed: the task may
   * be another's now), gives it back.
   */
  async afterTokens(
    op: 'extend' | 'ack' | 'reject' | 'deadLetter',
    items: ReadonlyArray<{ token: string; leaseMs?: number }>,
    results: readonly TokenResult[],
  ): Promise<void> {
    if (this.bound.size === 0) return;
    const released: CapSlot[] = [];
    const extended = new Map<string, { holdMs: number; permits: string[] }>();
    items.forEach((item, i) => {
      const slot = this.bound.get(item.token);
      if (!slot) return;
      if (op === 'extend' && results[i] === 'ok') {
        const holdMs = (item.leaseMs ?? 0) + CAP_GRACE_MS;
        const entry = extended.get(slot.client) ?? { holdMs, permits: [] };
        entry.holdMs = Math.max(entry.holdMs, holdMs);
        entry.permits.push(slot.permit);
        extended.set(slot.client, entry);
        return;
      }
      this.bound.delete(item.token);
      released.push(slot);
    });
    await Promise.all([
      this.release(released),
      ...[...extended].map(([client, { holdMs, permits }]) =>
        this.scripts.extend(clientCapKeys(this.prefix, client).held, holdMs, permits),
      ),
    ]);
  }

  /** Gives cap slots back (one ZREM per client, pipelined). */
  async release(slots: readonly CapSlot[]): Promise<void> {
    const byClient = new Map<string, string[]>();
    for (const { client, permit } of slots) {
      const list = byClient.get(client);
      if (list) list.push(permit);
      else byClient.set(client, [permit]);
    }
    await Promise.all(
      [...byClient].map(([client, permits]) =>
        this.redis.zrem(clientCapKeys(this.prefix, client).held, ...permits),
      ),
    );
  }
}
