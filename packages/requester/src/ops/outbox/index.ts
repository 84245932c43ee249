import type { Outbox } from '@requester/shared';
import { isoTime } from '../format.ts';

/** The PostgreSQL outbox at a glance: `requester outbox info` (./cli.ts) and the UI's overview. */

export interface OutboxView {
  rows: number;
  overdue: number;
  oldestDueAt: string | null;
  nextDueAt: string | null;
  lastDueAt: string | null;
  payloadBytes: number;
  at: string | null;
}

export async function outboxInfo(outbox: Pick<Outbox, 'stats'>): Promise<OutboxView> {
  const stats = await outbox.stats();
  return {
    rows: stats.rows,
    overdue: stats.overdue,
    oldestDueAt: isoTime(stats.oldestDueAt),
    nextDueAt: isoTime(stats.nextDueAt),
    lastDueAt: isoTime(stats.lastDueAt),
    payloadBytes: stats.payloadBytes,
    at: isoTime(stats.nowMs),
  };
}
