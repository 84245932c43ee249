import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A TCP proxy on loopback that a test places between Requester and one of its stores, and turns
 * faults on and off while traffic flows: the network faults of Toxiproxy's set, in-process.
 * - `latency`: every chunk, each way, is held `ms` before it is passed on (order kept);
 * - `stall`: connections stay open and accepted, and nothing is passed on either way until lifted
 *   (what a hung peer or a black-holed route looks like: no error, no answer);
 * - `partition`: every connection is cut and new ones are refused until lifted;
 * - `reset`: every open connection is cut once (RST), new ones pass;
 * - `bandwidth`: each way at most `bytesPerSecond`.
 * `heal()` lifts them all. A fault applies to connections open at the time and to later ones.
 */
export interface FaultProxy {
  /** `host:port` of the proxy: what the system under test is given instead of the store's. */
  readonly address: string;
  readonly port: number;
  latency(ms: number): void;
  stall(): void;
  partition(): void;
  reset(): void;
  bandwidth(bytesPerSecond: number): void;
  heal(): void;
  /** Connections accepted so far (a test checks that traffic went through it). */
  readonly accepted: number;
  close(): Promise<void>;
}

interface Faults {
  latencyMs: number;
  stalled: boolean;
  partitioned: boolean;
  bytesPerSecond: number;
}

/** One direction of a proxied connection: chunks in order, each passed on once the faults allow. */
class Pipe {
  private readonly queue: Array<{ chunk: Buffer; at: number }> = [];
  private pumping = false;
  private closed = false;
  private readonly to: net.Socket;
  private readonly faults: Faults;
  private readonly wake: { waiters: Set<() => void> };

  constructor(to: net.Socket, faults: Faults, wake: { waiters: Set<() => void> }) {
    this.to = to;
    this.faults = faults;
    this.wake = wake;
  }

  push(chunk: Buffer): void {
    this.queue.push({ chunk, at: Date.now() });
    void this.pump();
  }

  close(): void {
    this.closed = true;
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (!this.closed && this.queue.length > 0) {
        if (this.faults.stalled) {
          await new Promise<void>((resolve) => this.wake.waiters.add(resolve));
          continue;
        }
        const head = this.queue[0] as { chunk: Buffer; at: number };
        const due = head.at + this.faults.latencyMs - Date.now();
        if (due > 0) {
          await Promise.race([sleep(due), new Promise<void>((resolve) => this.wake.waiters.add(resolve))]);
          continue;
        }
        this.queue.shift();
        if (this.faults.bytesPerSecond > 0)
          await sleep(Math.ceil((head.chunk.length / this.faults.bytesPerSecond) * 1_000));
        if (this.closed || this.to.destroyed) return;
        if (!this.to.write(head.chunk)) await new Promise((resolve) => this.to.once('drain', resolve));
      }
    } finally {
      this.pumping = false;
    }
  }
}

/** Starts a proxy to `target` (`host:port`) on a free loopback port. */
export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const [host, port] = splitHostPort(target);
  const faults: Faults = { latencyMs: 0, stalled: false, partitioned: false, bytesPerSecond: 0 };
  const wake = { waiters: new Set<() => void>() };
  const notify = () => {
    const waiters = [...wake.waiters];
    wake.waiters.clear();
    for (const resolve of waiters) resolve();
  };
  const open = new Set<{ client: net.Socket; upstream: net.Socket }>();
  let accepted = 0;

  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    if (faults.partitioned) {
      client.resetAndDestroy();
      return;
    }
    accepted++;
    // Not `net.connect`: a process that reroutes its Kafka connections to this proxy
    // (kafka-route.ts) wraps that one, and the proxy's own way to the broker must not be rerouted.
    const upstream = new net.Socket().connect({ host, port });
    const pair = { client, upstream };
    open.add(pair);
    const up = new Pipe(upstream, faults, wake);
    const down = new Pipe(client, faults, wake);
    const end = () => {
      open.delete(pair);
      up.close();
      down.close();
      if (!client.destroyed) client.destroy();
      if (!upstream.destroyed) upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => up.push(chunk));
    upstream.on('data', (chunk: Buffer) => down.push(chunk));
    for (const socket of [client, upstream]) {
      socket.on('error', end);
      socket.on('close', end);
    }
    upstream.once('connect', () => client.resume());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const listening = (server.address() as net.AddressInfo).port;

  const cutAll = () => {
    for (const { client, upstream } of open) {
      client.resetAndDestroy();
      upstream.destroy();
    }
    open.clear();
  };

  return {
    address: `127.0.0.1:${listening}`,
    port: listening,
    get accepted() {
      return accepted;
    },
    latency(ms) {
      faults.latencyMs = ms;
      notify();
    },
    stall() {
      faults.stalled = true;
    },
    partition() {
      faults.partitioned = true;
      cutAll();
    },
    reset: cutAll,
    bandwidth(bytesPerSecond) {
      faults.bytesPerSecond = bytesPerSecond;
    },
    heal() {
      Object.assign(faults, { latencyMs: 0, stalled: false, partitioned: false, bytesPerSecond: 0 });
      notify();
    },
    async close() {
      faults.partitioned = true;
      cutAll();
      notify();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function splitHostPort(address: string): [string, number] {
  const at = address.lastIndexOf(':');
  return [address.slice(0, at).replace(/^\[|\]$/g, ''), Number(address.slice(at + 1))];
}
