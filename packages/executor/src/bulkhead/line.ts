/**
 * The slot line: the order in which the calls waiting for a full origin get its freed slots, the
 * queue's order (docs/architecture.md §6, "One order at a saturated origin"): clients by weighted
 * share, and inside a client the partitions take turns. Without it, the fair lease was undone at
 * the origin: the waits were served first come (or by fewest calls), so two backlogged clients of
 * weights 3 and 1 got 1 : 1 at the target, and a hot partition's leased tasks went before the cold
 * partitions leased after them.
 */

/** A call waiting in the process for a slot of its origin. */
export interface Waiter {
  /** Its cap: a freed slot goes to it only below that. */
  cap: number;
  /** Whose call (meta.client; '' when none). */
  client: string;
  /** Its queue partition (the unit of turns inside the client; '' when unknown: one partition). */
  partition?: string;
  /** It has been chosen for the slot just freed (it has left the line). */
  wake: () => void;
  /**
   * Parked (waitForSlot): woken, it goes through the gate again (a pace round trip) before its
   * call, while one waiting in its worker (acquire) calls at once.
   */
  parked?: boolean;
}

/** One partition's waiters at one origin, in a worker and parked: waiter → arrival number. */
interface PartitionLine {
  ready: Map<Waiter, number>;
  parked: Map<Waiter, number>;
  /** Its finish tag among its client's partitions (turns: +1 per slot it got from the line). */
  finish: number;
}

/** One client at one origin: its tag among the clients, its calls in flight, its waiting partitions. */
interface ClientLine {
  /** Finish tag: where its next slot starts (+1/weight per slot it gets, waited for or not). */
  finish: number;
  /** Calls in flight (while any, its tag is kept: it banks no credit by being served at once). */
  calls: number;
  /** Virtual time among its partitions: the start tag of the last one served from the line. */
  turn: number;
  /**
   * Partitions with a waiter in a worker / parked, least recently served first (a partition
   * served goes to the back): the front of each is its next turn, with no scan.
   */
  readyTurns: Map<string, PartitionLine>;
  parkedTurns: Map<string, PartitionLine>;
  partitions: Map<string, PartitionLine>;
}

interface OriginLine {
  /** Virtual time: the start tag of the last slot granted at the origin. */
  now: number;
  clients: Map<string, ClientLine>;
}

/**
 * The calls waiting for a slot of a full origin, and the tags that order them: start-time fair
 * queuing per origin, as the queue's lease does per shard. A slot (granted at once or handed over)
 * starts at max(the client's finish tag, the origin's virtual time) and moves the client's finish
 * tag on by 1/weight; a freed slot goes to the waiting client whose next slot starts first. A
 * client that had neither a call nor a waiter at the origin is forgotten, and starts at the
 * virtual time when it comes back: no credit banked while idle. Inside a client, the partitions
 * take turns the same way with weight 1, so a hot partition's leased backlog does not go before a
 * cold partition's task leased after it. Among equal tags, a waiter in its worker goes before a
 * parked one (the slot would idle through the parked one's gate: an origin at its cap served at
 * half its pace under load, bench/load.ts), then the first come.
 */
export class SlotLine {
  private readonly origins = new Map<string, OriginLine>();
  private readonly weightOf: (client: string) => number;
  private arrivals = 0;

  /** `weightOf`: a client's weight (the queue's, `requester keys … --weight`); 1 when unknown. */
  constructor(weightOf: (client: string) => number = () => 1) {
    this.weightOf = weightOf;
  }

  join(origin: string, waiter: Waiter): void {
    const client = this.clientLine(origin, waiter.client);
    const name = waiter.partition ?? '';
    let partition = client.partitions.get(name);
    if (!partition) {
      partition = { ready: new Map(), parked: new Map(), finish: client.turn };
      client.partitions.set(name, partition);
    }
    const [waiters, turns] = waiter.parked
      ? [partition.parked, client.parkedTurns]
      : [partition.ready, client.readyTurns];
    waiters.set(waiter, ++this.arrivals);
    if (!turns.has(name)) turns.set(name, partition);
  }

  leave(origin: string, waiter: Waiter): void {
    const line = this.origins.get(origin);
    const client = line?.clients.get(waiter.client);
    const name = waiter.partition ?? '';
    const partition = client?.partitions.get(name);
    if (!line || !client || !partition) return;
    partition.ready.delete(waiter);
    partition.parked.delete(waiter);
    if (partition.ready.size === 0) client.readyTurns.delete(name);
    if (partition.parked.size === 0) client.parkedTurns.delete(name);
    if (partition.ready.size === 0 && partition.parked.size === 0) client.partitions.delete(name);
    this.forget(origin, line, waiter.client, client);
  }

  /**
   * Counts a slot of `client` at `origin` (granted at once or handed over): its tag moves on by
   * 1/weight. The function returned ends the call (once).
   */
  took(origin: string, client: string): () => void {
    const line = this.originLine(origin);
    const entry = this.clientLine(origin, client);
    const start = Math.max(entry.finish, line.now);
    line.now = start;
    entry.finish = start + 1 / Math.max(1, this.weightOf(client));
    entry.calls++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      entry.calls--;
      if (line.clients.get(client) === entry) this.forget(origin, line, client, entry);
    };
  }

  /** Whether calls wait for a slot of `origin`. */
  waiting(origin: string): boolean {
    const line = this.origins.get(origin);
    if (!line) return false;
    for (const client of line.clients.values()) if (client.partitions.size > 0) return true;
    return false;
  }

  /**
   * Wakes the waiter a freed slot of `origin` goes to (`inFlight` calls there now), by the order
   * above. None below its cap (a limit lowered meanwhile): nobody is woken. Whether one was.
   */
  wakeNext(origin: string, inFlight: number): boolean {
    const line = this.origins.get(origin);
    if (!line) return false;
    let best: { client: ClientLine; pick: Pick; start: number } | undefined;
    for (const client of line.clients.values()) {
      if (client.partitions.size === 0) continue;
      const pick = nextOfClient(client, inFlight);
      if (!pick) continue;
      const start = Math.max(client.finish, line.now);
      if (!best || start < best.start || (start === best.start && before(pick, best.pick)))
        best = { client, pick, start };
    }
    if (!best) return false;
    const { client, pick } = best;
    const { partition, name, waiter } = pick;
    // The partition's turn: it starts at its tag (or the client's turn, if behind) and goes back.
    const start = Math.max(partition.finish, client.turn);
    client.turn = start;
    partition.finish = start + 1;
    for (const turns of [client.readyTurns, client.parkedTurns]) {
      if (!turns.delete(name)) continue;
      turns.set(name, partition);
    }
    this.leave(origin, waiter);
    waiter.wake();
    return true;
  }

  private originLine(origin: string): OriginLine {
    let line = this.origins.get(origin);
    if (!line) {
      line = { now: 0, clients: new Map() };
      this.origins.set(origin, line);
    }
    return line;
  }

  private clientLine(origin: string, name: string): ClientLine {
    const line = this.originLine(origin);
    let client = line.clients.get(name);
    if (!client) {
      client = {
        finish: line.now,
        calls: 0,
        turn: 0,
        readyTurns: new Map(),
        parkedTurns: new Map(),
        partitions: new Map(),
      };
      line.clients.set(name, client);
    }
    return client;
  }

  /** Drops a client with neither calls nor waiters, and an origin with no client left. */
  private forget(origin: string, line: OriginLine, name: string, client: ClientLine): void {
    if (client.calls > 0 || client.partitions.size > 0) return;
    line.clients.delete(name);
    if (line.clients.size === 0 && this.origins.get(origin) === line) this.origins.delete(origin);
  }
}

/** A client's candidate for a freed slot: its waiter, partition and start tag in the client. */
interface Pick {
  waiter: Waiter;
  arrival: number;
  name: string;
  partition: PartitionLine;
  start: number;
}

/**
 * A client's next waiter: the partition whose turn comes first (the front of the turns in a worker
 * or parked, the lower start tag; a waiter in its worker among equals), its first waiter below cap.
 */
function nextOfClient(client: ClientLine, inFlight: number): Pick | undefined {
  const ready = frontBelowCap(client.readyTurns, client.turn, inFlight, false);
  const parked = frontBelowCap(client.parkedTurns, client.turn, inFlight, true);
  if (!ready) return parked;
  if (!parked) return ready;
  return parked.start < ready.start ? parked : ready;
}

/** Whether `a` goes before `b` among clients of equal tags: in its worker first, then first come. */
function before(a: Pick, b: Pick): boolean {
  const aParked = a.waiter.parked === true;
  const bParked = b.waiter.parked === true;
  if (aParked !== bParked) return !aParked;
  return a.arrival < b.arrival;
}

/**
 * The first partition in `turns` with a waiter below its cap, and that waiter. Parked waiters read
 * their origin's limit when asked, the same for all of them: when the first is at its cap, so are
 * the others. Those in a worker keep the cap of their arrival (at most MAX_WORKERS of them).
 */
function frontBelowCap(
  turns: Map<string, PartitionLine>,
  turn: number,
  inFlight: number,
  parked: boolean,
): Pick | undefined {
  for (const [name, partition] of turns) {
    for (const [waiter, arrival] of parked ? partition.parked : partition.ready) {
      if (inFlight < waiter.cap)
        return { waiter, arrival, name, partition, start: Math.max(partition.finish, turn) };
      if (parked) return undefined;
      break;
    }
  }
  return undefined;
}
