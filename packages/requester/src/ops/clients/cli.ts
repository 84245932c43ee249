import type { QueueAdmin } from '@requester/queue';
import { printJson, printTable, progressCounter } from '../../commands/common.ts';
import { humanSpan } from '../format.ts';

/**
 * `requester queue info --by-client`: the queue per client (fair share between clients, issue 21),
 * largest backlog first: pending tasks, ready partitions (what it has in the fair share now), its
 * weight, its cap of tasks in flight and how many it has in flight (capped clients only: the count is
 * kept for them), and how long the task its next turn would lease has waited.
 */
export async function printClients(admin: QueueAdmin, json: boolean): Promise<void> {
  const clients = await admin.clients({ onProgress: progressCounter('queue info', 'shard') });
  if (json) return printJson(clients);
  if (clients.length === 0) {
    process.stdout.write('no client has pending tasks or a cap\n');
    return;
  }
  printTable(
    clients.map((c) => ({
      client: c.client === '' ? '(none)' : c.client,
      pending: c.pending,
      ready: c.readyPartitions,
      weight: c.weight,
      cap: c.maxInFlight ?? '-',
      'in flight': c.inFlight ?? '-',
      'next waited': c.oldestReadyAgeMs === null ? '-' : humanSpan(c.oldestReadyAgeMs),
    })),
  );
}
