import { BoundedLabel, counter, gauge, histogram } from '@requester/shared/metrics';

/** Clients with a label of their own in `queue_client_wait_seconds`; later ones are `other`. */
export const MAX_CLIENT_LABELS = 20;

/**
 * How long a due task waits for a worker: from milliseconds on an idle queue to hours behind a
 * backlog or a pause, so beyond the default buckets.
 */
const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

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
  clientWait: histogram(
    'queue_client_wait_seconds',
    `per client, how long each leased task waited from its due time to its lease (retries and scheduled tasks from when they fell due; the first ${MAX_CLIENT_LABELS} clients a process leases for, the rest as client="other"; client="(none)": tasks without a client); observed by the executors`,
    ['queue', 'client'],
    WAIT_BUCKETS,
  ),
  priorityWait: histogram(
    'queue_priority_wait_seconds',
    'per priority (-10..10, "0" for tasks without one), how long each leased task waited from its due time to its lease; observed by the executors',
    ['queue', 'priority'],
    WAIT_BUCKETS,
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

/**
 * Clients are user input: bounded like origins (see BoundedLabel: first come, so that a client's
 * series never jumps between its name and `other` while the process lives).
 */
export const clientLabel = new BoundedLabel(MAX_CLIENT_LABELS);
