import type { FairQueue, LeasedTask } from '@requester/queue';
import type { Logger } from '@requester/shared/log';
import type { Job } from './settlement.ts';

/**
 * The leases this executor holds, kept alive (BullMQ's LockManager): every held lease is pushed a
 * TTL ahead every third of it, so a call longer than the TTL keeps its task. A lease the queue
 * answers `stale` to is lost (it lapsed, and another executor may hold it now): its task must not
 * be called from here.
 */
export class LeaseHeartbeat {
  private readonly queue: Pick<FairQueue, 'extendMany'>;
  private readonly leaseTtlMs: number;
  private readonly log: Logger;
  private readonly held = new Map<string, LeasedTask>();
  private readonly lost = new Set<string>();
  /** When the last heartbeat that renewed the held leases was sent (epoch ms). */
  private renewedAt = 0;
  private renewing = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(queue: Pick<FairQueue, 'extendMany'>, leaseTtlMs: number, log: Logger) {
    this.queue = queue;
    this.leaseTtlMs = leaseTtlMs;
    this.log = log;
  }

  start(): void {
    this.timer = setInterval(() => void this.extend(), Math.max(1, this.leaseTtlMs / 3));
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Leases held and not yet settled. */
  get size(): number {
    return this.held.size;
  }

  hold(leases: LeasedTask[]): void {
    for (const lease of leases) this.held.set(lease.token, lease);
  }

  /** The lease is settled (or left to lapse): no longer renewed. */
  release(token: string): void {
    this.held.delete(token);
    this.lost.delete(token);
  }

  /**
   * Whether a parked task's lease is surely still this executor's, a third of its TTL to spare:
   * the heartbeat did not find it lost, and renewed it (or it was leased) recently enough. A
   * heartbeat that keeps failing (Redis unreachable) lets the lease lapse; another executor may
   * then lease the task and call, so this one does not.
   */
  holds(job: Job): boolean {
    if (this.lost.has(job.lease.token)) return false;
    const { leaseTtlMs } = this;
    return Date.now() < Math.max(job.leasedAt, this.renewedAt) + leaseTtlMs - leaseTtlMs / 3;
  }

  private async extend(): Promise<void> {
    // One renewal at a time: on a slow Redis a second would queue behind the first on the same
    // connection, and would still count as lost a lease the first finds lost.
    if (this.renewing) return;
    // A lost lease is not this executor's to renew, nor to count again.
    const tokens = [...this.held.keys()].filter((token) => !this.lost.has(token));
    if (tokens.length === 0) return;
    const sentAt = Date.now();
    this.renewing = true;
    try {
      const results = await this.queue.extendMany(
        tokens.map((token) => ({ token, leaseMs: this.leaseTtlMs })),
      );
      this.renewedAt = sentAt;
      // A lease settled while the renewal was on its way is answered `stale` too: only those
      // still held were lost.
      const lost = tokens.filter((token, i) => results[i] === 'stale' && this.held.has(token));
      for (const token of lost) this.lost.add(token);
      if (lost.length > 0) this.log.warn({ lost: lost.length }, 'leases lost before their tasks finished');
    } catch (err) {
      this.log.warn({ err }, 'lease heartbeat failed');
    } finally {
      this.renewing = false;
    }
  }
}
