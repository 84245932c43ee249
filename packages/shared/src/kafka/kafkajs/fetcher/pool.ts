import type { Logger } from '../../../log/index.ts';
import { type ClusterSettings, type LowLevelCluster, lowLevelCluster } from './internals.ts';

/**
 * A few low-level clusters (each its own connections) used in turn, so that one slow Fetch does
 * not hold up the others. Each connects on first use, and again after a failure.
 */
export class ConnectionPool {
  private readonly clusters: LowLevelCluster[];
  private readonly connecting: Array<Promise<void> | undefined>;
  private next = 0;

  constructor(size: number, settings: ClusterSettings, log: Logger) {
    this.clusters = Array.from({ length: size }, () => lowLevelCluster(settings, log));
    this.connecting = this.clusters.map(() => undefined);
  }

  /** The next cluster, round-robin, connected. */
  async cluster(): Promise<LowLevelCluster> {
    const index = this.next++ % this.clusters.length;
    const cluster = this.clusters[index]!;
    this.connecting[index] ??= cluster.connect().catch((err: unknown) => {
      this.connecting[index] = undefined;
      throw err;
    });
    await this.connecting[index];
    return cluster;
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.clusters.map((c) => c.disconnect()));
  }
}
