/** One client's calls in the pool: running, and waiting by partition (taking turns). */
interface Line {
  client: string;
  weight: number;
  /** Calls started and not yet released. */
  inFlight: number;
  /** Calls waiting for a worker. */
  waiting: number;
  /** The waiting calls by partition, in turn order: the first partition goes next, then moves last. */
  partitions: Map<string, Array<() => void>>;
}

/**
 * The executor's workers, shared fairly between clients (docs/architecture.md §5 "The worker
 * pool"). A call asks for a worker for its client and partition; a freed worker goes to the
 * waiting client with the fewest calls in flight for its weight, and within a client the
 * partitions take turns. Work-conserving: a client alone may take every worker. A client's
 * **share** is `maxWorkers × weight / Σ weights` of the clients with calls in flight or waiting;
 * a client below it **borrows** a worker at once even when all are taken, up to twice `maxWorkers`
 * calls in all (the shares add up to `maxWorkers`, so borrowers alone never pass that bound), while
 * a client at or over its share starts nothing while the pool is full. Calls in flight are never
 * cancelled: a client that took every worker gives them back as its calls end.
 */
export class WorkerPool {
  readonly maxWorkers: number;
  /** Calls started and not released, borrowed ones included. */
  running = 0;
  /** Calls waiting for a worker. */
  waiting = 0;
  private readonly lines = new Map<string, Line>();
  /** Σ weights of the clients in `lines` (those with calls in flight or waiting). */
  private activeWeight = 0;
  private weights: ReadonlyMap<string, number> = new Map();
  /** Clients with calls waiting: a hand-off looks at these alone. */
  private readonly waiters = new Set<Line>();

  constructor(maxWorkers: number) {
    this.maxWorkers = maxWorkers;
  }

  /** The clients' weights (absent: 1), e.g. the queue's (FairQueue.clientWeights). */
  setWeights(weights: ReadonlyMap<string, number>): void {
    this.weights = weights;
    this.activeWeight = 0;
    for (const [client, line] of this.lines) {
      line.weight = weights.get(client) ?? 1;
      this.activeWeight += line.weight;
    }
  }

  /** Runs `call` on a worker of `client`'s, once one is free for it (see the class). */
  run<T>(client: string, partition: string, call: () => Promise<T>): Promise<T> {
    const line = this.lineOf(client);
    if (line.waiting === 0 && ((this.running < this.maxWorkers && this.first(line)) || this.borrows(line))) {
      this.running++;
      line.inFlight++;
      return call().finally(() => this.release(line));
    }
    return new Promise<void>((resolve) => this.enqueue(line, partition, resolve)).then(() =>
      call().finally(() => this.release(line)),
    );
  }

  /**
   * Whether `client` is below its share (counted as active if it is not yet) with room under the
   * bound of twice `maxWorkers`: a call of it leased while every worker is taken may borrow one.
   */
  mayBorrow(client: string): boolean {
    const line = this.lines.get(client);
    if (line) return line.waiting === 0 && this.borrows(line);
    return this.running < 2 * this.maxWorkers;
  }

  /** Calls of `client` running or waiting. */
  load(client: string): number {
    const line = this.lines.get(client);
    return line ? line.inFlight + line.waiting : 0;
  }

  /** `client`'s share of the workers now (see the class), counted as active. */
  shareOf(client: string): number {
    const line = this.lines.get(client);
    const weight = line?.weight ?? this.weights.get(client) ?? 1;
    return (this.maxWorkers * weight) / (this.activeWeight + (line ? 0 : weight));
  }

  private lineOf(client: string): Line {
    let line = this.lines.get(client);
    if (!line) {
      const weight = this.weights.get(client) ?? 1;
      line = { client, weight, inFlight: 0, waiting: 0, partitions: new Map() };
      this.lines.set(client, line);
      this.activeWeight += weight;
    }
    return line;
  }

  /** Below its share, and room under the bound of twice `maxWorkers`. */
  private borrows(line: Line): boolean {
    if (this.running >= 2 * this.maxWorkers) return false;
    return line.inFlight < (this.maxWorkers * line.weight) / this.activeWeight;
  }

  /** No waiting client has fewer calls in flight for its weight. */
  private first(line: Line): boolean {
    const ratio = line.inFlight / line.weight;
    for (const other of this.waiters)
      if (other !== line && other.inFlight / other.weight < ratio) return false;
    return true;
  }

  private enqueue(line: Line, partition: string, resolve: () => void): void {
    const queue = line.partitions.get(partition);
    if (queue) queue.push(resolve);
    else line.partitions.set(partition, [resolve]);
    line.waiting++;
    this.waiting++;
    this.waiters.add(line);
  }

  private release(line: Line): void {
    this.running--;
    line.inFlight--;
    this.dispatch();
    this.forget(line);
  }

  /** Hands free (or borrowable) workers to the waiting clients, fewest in flight for their weight first. */
  private dispatch(): void {
    while (this.waiters.size > 0) {
      let next: Line | undefined;
      let best = Number.POSITIVE_INFINITY;
      for (const line of this.waiters) {
        const ratio = line.inFlight / line.weight;
        if (ratio < best) {
          best = ratio;
          next = line;
        }
      }
      if (!next) return;
      if (this.running >= this.maxWorkers && !this.borrows(next)) return;
      this.wake(next);
    }
  }

  /** Starts the next waiting call of `line`: its partitions take turns. */
  private wake(line: Line): void {
    const entry = line.partitions.entries().next();
    if (entry.done) {
      this.waiters.delete(line);
      return;
    }
    const [partition, queue] = entry.value;
    const resolve = queue.shift() as () => void;
    line.partitions.delete(partition);
    if (queue.length > 0) line.partitions.set(partition, queue);
    line.waiting--;
    this.waiting--;
    if (line.waiting === 0) this.waiters.delete(line);
    this.running++;
    line.inFlight++;
    resolve();
  }

  /** A client with nothing in flight nor waiting leaves the shares. */
  private forget(line: Line): void {
    if (line.inFlight > 0 || line.waiting > 0) return;
    this.lines.delete(line.client);
    this.activeWeight -= line.weight;
  }
}
