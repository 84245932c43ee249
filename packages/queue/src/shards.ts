/**
 * What this process knows of each shard, and the plan of a lease call drawn from it (a wave: which
 * shards to visit, how many tasks to ask of each). The view lets a lease skip idle shards without
 * a round trip to each; it is a hint, corrected by every script reply and refreshed periodically.
 */

/** One lease round trip: tasks to ask of each shard, and the most one partition may give. */
export interface Wave {
  asks: Map<number, number>;
  quantum: number;
}

/**
 * What this process knows about each shard: when it next has something to do (a ready partition,
 * a timer or a lease deadline), in local ms, and how many partitions it had ready. Updated by every
 * script reply, by wake messages, and by a periodic refresh.
 */
export class ShardView {
  readonly shards: number;
  readonly wakeAt: Float64Array;
  readonly ready: Uint32Array;
  refreshedAt = Number.NEGATIVE_INFINITY;
  /** Shards to visit first (a client joined their fair share), in the order announced. */
  private readonly firsts = new Set<number>();
  /** The next shard a wave starts from; each process starts at a random one. */
  private cursor: number;

  constructor(shards: number) {
    this.shards = shards;
    // Workers start at different shards so that they do not all hit shard 0.
    this.cursor = Math.floor(Math.random() * shards);
    // Unknown shards count as having work: the first lease looks everywhere.
    this.wakeAt = new Float64Array(shards).fill(0);
    this.ready = new Uint32Array(shards);
  }

  update(shard: number, readyCount: number, nextEventMs: number, now = Date.now()): void {
    this.ready[shard] = readyCount;
    this.wakeAt[shard] =
      readyCount > 0 ? now : nextEventMs >= 0 ? now + nextEventMs : Number.POSITIVE_INFINITY;
  }

  wake(shard: number, inMs: number): void {
    this.wakeAt[shard] = Math.min(this.wakeAt[shard] ?? 0, Date.now() + inMs);
    if (inMs === 0) this.ready[shard] = Math.max(1, this.ready[shard] ?? 0);
  }

  first(shard: number): void {
    this.firsts.add(shard);
    this.wake(shard, 0);
  }

  /** The shards to visit first, in the order announced (a copy: `visited` forgets them). */
  firstShards(): number[] {
    return [...this.firsts];
  }

  visited(shard: number): void {
    this.firsts.delete(shard);
  }

  hasWork(shard: number, now: number): boolean {
    return (this.wakeAt[shard] ?? 0) <= now;
  }

  /**
   * Which shards to visit and how many tasks to ask of each. Walks the shards from the cursor,
   * skipping those known to have nothing to do, until the ready partitions met could give k tasks
   * at one task each, or `maxShards` shards were picked. When fewer than k partitions were met,
   * each may give up to `quantum` = ceil(k / partitions met) tasks: few shards per lease (few script
   * calls) while every partition still gets the same share per visit of its shard. The cursor then
   * moves past the last shard picked, so that shards take turns.
   */
  planWave(k: number, maxShards: number): Wave {
    const now = Date.now();
    const picked: number[] = [];
    let partitionsMet = 0;
    // Shards where a client joined the fair share first (announced by its publisher), once each.
    for (const shard of this.firstShards()) {
      if (picked.length >= maxShards || partitionsMet >= k) break;
      this.visited(shard);
      picked.push(shard);
      partitionsMet += Math.max(1, this.ready[shard] ?? 0);
    }
    let last = this.cursor - 1;
    for (let i = 0; i < this.shards && picked.length < maxShards && partitionsMet < k; i++) {
      const shard = (this.cursor + i) % this.shards;
      if (!this.hasWork(shard, now) || picked.includes(shard)) continue;
      picked.push(shard);
      partitionsMet += Math.max(1, this.ready[shard] ?? 0);
      last = shard;
    }
    this.cursor = (last + 1) % this.shards;
    const quantum = Math.max(1, Math.ceil(k / Math.max(1, partitionsMet)));
    const asks = new Map<number, number>();
    let remaining = k;
    for (const shard of picked) {
      if (remaining <= 0) break;
      const ask = Math.min(remaining, Math.max(1, this.ready[shard] ?? 0) * quantum);
      asks.set(shard, ask);
      remaining -= ask;
    }
    return { asks, quantum };
  }

  /** How long an idle worker may sleep: until the soonest shard has something to do, at most maxIdleMs. */
  idleFor(maxIdleMs: number): number {
    const now = Date.now();
    let soonest = Number.POSITIVE_INFINITY;
    for (let shard = 0; shard < this.shards; shard++) soonest = Math.min(soonest, this.wakeAt[shard] ?? 0);
    return Math.max(0, Math.min(soonest - now, maxIdleMs));
  }
}
