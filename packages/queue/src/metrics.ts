import { counter, gauge, histogram } from '@requester/shared';

/** Queue metrics on the process registry; `queue` is the FairQueue's `name`. */
export const queueMetrics = {
  depth: gauge('queue_depth', 'Tasks in the Redis queue by state (sampled by info/sampleDepth)', [
    'queue',
    'state',
  ]),
  published: counter('queue_published_total', 'Tasks offered to publish, by result', ['queue', 'result']),
  leased: counter('queue_leased_total', 'Tasks leased', ['queue']),
  leaseLatency: histogram('queue_lease_seconds', 'Duration of one lease call (all shards visited)', [
    'queue',
  ]),
  settled: counter('queue_settled_total', 'Lease settlements, by operation and result', [
    'queue',
    'op',
    'result',
  ]),
  reclaimed: counter('queue_reclaimed_total', 'Expired leases taken back from their workers', ['queue']),
  deadLettered: counter('queue_dead_lettered_total', 'Tasks moved to the dead letters, by cause', [
    'queue',
    'cause',
  ]),
};
