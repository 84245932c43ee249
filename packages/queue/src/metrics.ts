import { counter, gauge, histogram } from '@requester/shared/metrics';

/** Queue metrics on the process registry; `queue` is the FairQueue's `name`. */
export const queueMetrics = {
  depth: gauge(
    'queue_depth',
    'tasks in the Redis queue by state: pending (waiting, due or delayed), leased, dead (sampled by the routers)',
    ['queue', 'state'],
  ),
  partitions: gauge(
    'queue_partitions',
    'partitions of the Redis queue by state: ready (due head), waiting (delayed head or blocked after a reject), blocked (in-flight limit reached); sampled by the routers',
    ['queue', 'state'],
  ),
  oldestAge: gauge(
    'queue_oldest_task_age_seconds',
    'age of the oldest pending task since its first publish (0 when none is pending; sampled by the routers)',
    ['queue'],
  ),
  clientDepth: gauge(
    'queue_client_depth',
    'pending tasks per client (the 20 largest backlogs by name, the rest summed as client="other"; client="(none)": tasks without a client); sampled by the routers',
    ['queue', 'client'],
  ),
  clientOldestAge: gauge(
    'queue_client_oldest_ready_age_seconds',
    'per client, how long the task its next fair-share turn would lease has waited since its first publish (the 20 largest backlogs, the rest as client="other", their maximum); sampled by the routers',
    ['queue', 'client'],
  ),
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
