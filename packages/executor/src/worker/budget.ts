/**
 * Leases held at most, per worker. A wake-up (empty `request.uri`) takes no worker once its record
 * is read, so a lease may ask for more tasks than there are free workers when recent batches were
 * wake-ups (see LeaseBudget.size). The bound keeps small what a slow `out` can pile up (results
 * made but not yet written, made again elsewhere if this process dies) and what a lease sized for
 * wake-ups can hold back from other executors when it brings calls instead.
 */
export const HELD_PER_WORKER = 4;

/**
 * Wake-ups held at most per process besides the workers' bound (HELD_PER_WORKER): read, their
 * results made and waiting for a flush (a few KiB each). A drain at an instant ("send at 09:00")
 * then moves in lease, produce and ack calls of hundreds of tasks. A call leased in such a batch
 * beyond the workers' bound goes back to the queue unattempted (see LeaseBudget.callsOver), so
 * other executors are not held from calls.
 */
export const WAKE_UPS_HELD = 2_048;

/**
 * How long every worker may stay taken, none freed, before the loop leases to find a client that
 * may borrow one (see LeaseBudget.borrowSize). Workers that free within it serve newcomers through
 * the ordinary lease, whose fair order puts a client with nothing in flight first.
 */
export const BORROW_AFTER_MS = 50;

/** The most tasks one borrowing lease asks for: enough to meet a waiting client's task in fair order. */
export const BORROW_LEASE = 8;

/**
 * The executor's lease budget: how many tasks the next lease asks for, from what it holds. No I/O,
 * no timers: the loop tells it what happened (taken, read, freed, parked) and asks it.
 * `working` counts the calls leased and not settled, parked ones aside: each takes one of the
 * `maxWorkers` workers, or borrows one (see WorkerPool) up to twice `maxWorkers` in all.
 */
export class LeaseBudget {
  readonly maxWorkers: number;
  /** Leased calls not yet settled nor parked (wake-ups aside once read). */
  working = 0;
  /** Tasks leased and not settled, parked ones included (the heartbeat's held leases). */
  held = 0;
  /** Tasks leased whose records are not read yet: calls or wake-ups, not known. */
  unread = 0;
  /** Tasks leased and not yet handed to the pool (or settled): their clients' shares do not show them. */
  entering = 0;
  /** Tasks parked (see ParkingLot): they hold a lease and no worker, and have a budget of their own. */
  parked = 0;
  /** Wake-ups leased and not yet settled (see WAKE_UPS_HELD). */
  wakeUpsHeld = 0;
  /** The share of wake-ups in recent lease batches (halved per batch): how far a lease may outgrow the free workers. */
  wakeUpShare = 0;
  /** Wake-ups in the latest lease batch: the next lease asks for twice as many at most. */
  lastWakeUps = 0;
  /** When a worker was last taken or freed, or a borrowing lease sent (epoch ms): see borrowSize. */
  private quietSince = 0;

  constructor(maxWorkers: number) {
    this.maxWorkers = maxWorkers;
  }

  /** A lease batch was taken: every task holds a lease and, until read, a worker. */
  taken(count: number, now: number): void {
    this.held += count;
    this.working += count;
    this.unread += count;
    this.entering += count;
    this.quietSince = now;
  }

  /** A lease batch's tasks are in the worker pool (or settled without it). */
  entered(count: number): void {
    this.entering -= count;
  }

  /**
   * A lease batch's records were read (`leased` tasks, `parsed` of them queued tasks): its
   * wake-ups free their workers at once (a wake-up calls nobody) and count in their own budget.
   */
  read(leased: number, parsed: number, wakeUps: number): void {
    this.unread -= leased;
    this.wakeUpShare = (this.wakeUpShare + wakeUps / Math.max(parsed, 1)) / 2;
    this.wakeUpsHeld += wakeUps;
    this.lastWakeUps = wakeUps;
    this.working -= wakeUps;
  }

  /** A call's worker is free (settled, or parked); `now` dates it for borrowSize. */
  freed(now: number): void {
    this.working--;
    this.quietSince = now;
  }

  /** A lease is settled (its task's worker freed apart, see freed). */
  settled(wakeUp: boolean): void {
    this.held--;
    if (wakeUp) this.wakeUpsHeld--;
  }

  /** A parked task took its worker back to go through the gate again. */
  resumed(): void {
    this.working++;
  }

  /**
   * How many tasks the next lease asks for: one per free worker, more when recent batches were
   * wake-ups, which take none: for calls, HELD_PER_WORKER per free worker at most and
   * HELD_PER_WORKER × `maxWorkers` calls held; when mostly wake-ups, as many as keep the expected
   * calls within the free workers and the expected wake-ups within the free WAKE_UPS_HELD budget
   * and twice the latest batch's wake-ups. Parked tasks aside.
   */
  size(): number {
    const { maxWorkers } = this;
    // The records of the latest batches may still be being read: the wake-ups expected among them
    // will take no worker, so a drain's next lease overlaps the previous batch's read.
    const workers = maxWorkers - this.working + Math.floor(this.unread * this.wakeUpShare);
    if (workers <= 0) return 0;
    const callShare = Math.max(1 - this.wakeUpShare, 1 / HELD_PER_WORKER);
    const calls = this.held - this.parked - this.wakeUpsHeld;
    const forCalls = Math.min(Math.ceil(workers / callShare), HELD_PER_WORKER * maxWorkers - calls);
    // A drain doubles its batches and a batch without wake-ups stops it, so only a drain goes
    // beyond the calls' bound (whose excess is given back).
    const share = this.wakeUpShare;
    const free = WAKE_UPS_HELD - this.wakeUpsHeld - this.unread;
    const room = Math.min(free, 2 * this.lastWakeUps);
    const fitting = Math.min(workers / Math.max(1 - share, 1e-6), room / Math.max(share, 1e-6), free);
    const forWakeUps = room <= 0 ? 0 : Math.floor(fitting);
    return Math.max(forCalls, forWakeUps);
  }

  /**
   * How many tasks a lease may ask for when every worker is taken (size() is 0), for a client
   * that may borrow a worker (WorkerPool.mayBorrow): none while workers keep being taken or freed
   * (the ordinary lease serves newcomers then), a borrowing lease went out within BORROW_AFTER_MS,
   * or tasks of a lease are not in the pool yet.
   * Bounded by twice `maxWorkers` calls started (`waiting`: calls in the pool not started yet) and
   * by the calls' bound of HELD_PER_WORKER × `maxWorkers`, so that such a lease never brings
   * calls the loop would give back for want of room.
   */
  borrowSize(now: number, waiting: number): number {
    // Tasks not in the pool yet (records being read): the shares cannot be told.
    if (now - this.quietSince < BORROW_AFTER_MS || this.entering > 0) return 0;
    return Math.max(0, Math.min(this.borrowRoom(waiting), BORROW_LEASE));
  }

  /** How long until a borrowing lease may go (see borrowSize); Infinity when none may. */
  borrowIn(now: number, waiting: number): number {
    // Tasks entering the pool change the room: asked again once they are in.
    if (this.entering > 0) return BORROW_AFTER_MS;
    if (this.borrowRoom(waiting) <= 0) return Number.POSITIVE_INFINITY;
    return Math.max(0, BORROW_AFTER_MS - (now - this.quietSince));
  }

  private borrowRoom(waiting: number): number {
    const calls = this.held - this.parked - this.wakeUpsHeld;
    const started = this.working - waiting;
    return Math.min(2 * this.maxWorkers - started, HELD_PER_WORKER * this.maxWorkers - calls);
  }

  /** A borrowing lease was sent: the next one waits BORROW_AFTER_MS unless it found a borrower. */
  borrowed(now: number, found: boolean): void {
    this.quietSince = found ? 0 : now;
  }

  /**
   * How many calls of a batch just read go back to the queue unattempted: those beyond the
   * HELD_PER_WORKER × `maxWorkers` calls held, which a lease sized for wake-ups may bring when the
   * work turned to calls. Held here they would wait for this process's workers while other
   * executors could run them; the wake-up share falls with the batch, so the next lease is sized
   * for calls.
   */
  callsOver(): number {
    const calls = this.held - this.parked - this.wakeUpsHeld - this.unread;
    return Math.max(0, calls - HELD_PER_WORKER * this.maxWorkers);
  }
}
