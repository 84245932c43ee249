/**
 * Concurrency keys (`meta.concurrency`, docs/architecture.md glossary): at most `limit` calls in
 * flight for a key across every executor. A key's slots are the cluster bulkhead's machinery (a
 * Redis ZSET of leases with expiry, one key per concurrency key, so one Redis Cluster slot), in a
 * namespace of their own: a key is not an origin. A task refused waits parked in its key's slot
 * line (SlotLine: the queue's fair order), without a worker, as a task refused by the bulkhead.
 */

import { longestCallMs } from '@requester/policies';
import type { Config } from '@requester/shared/config';
import { clientScoped, MAX_CONCURRENCY_LIMIT } from '@requester/shared/contract';
import { isDestinationConcurrencyKey } from '@requester/shared/destinations';
import type { Logger } from '@requester/shared/log';
import { counter, gauge } from '@requester/shared/metrics';
import type { RedisClient } from '@requester/shared/redis';
import { ClusterBulkhead, type Granted, type SlotGrant } from '../bulkhead/index.ts';

const metrics = {
  waits: counter('concurrency_waits_total', 'calls refused because their concurrency key was at its limit'),
  waiting: gauge('concurrency_waiting', 'tasks parked in this executor for a slot of their concurrency key'),
};

/** A slot of a concurrency key, told apart from an origin's slot when it is handed to a parked task. */
export type KeyGrant = Granted & { concurrencyKey: string };

export function isKeyGrant(grant: Granted | undefined): grant is KeyGrant {
  return grant !== undefined && 'concurrencyKey' in grant;
}

/**
 * The concurrency key of a request in its client's namespace (as limiter keys are), but for a
 * destination's, which no caller can write and every caller shares.
 */
export function concurrencyKeyOf(client: string | undefined, key: string): string {
  return isDestinationConcurrencyKey(key) ? key : clientScoped(client, key);
}

export interface KeyConcurrencyOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `rq:concurrency:`. */
  prefix: string;
  /** How long a slot is held when its caller never frees it: longer than any call lasts. */
  leaseMs: number;
  logger?: Logger;
  /** A client's weight, for the order of the line (SlotLine; 1 when not given). */
  weightOf?: (client: string) => number;
  random?: () => number;
}

export class KeyConcurrency {
  private readonly slots: ClusterBulkhead;

  constructor(options: KeyConcurrencyOptions) {
    this.slots = new ClusterBulkhead({
      redis: options.redis,
      prefix: options.prefix,
      maxPerOrigin: MAX_CONCURRENCY_LIMIT,
      leaseMs: options.leaseMs,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.weightOf ? { weightOf: options.weightOf } : {}),
      ...(options.random ? { random: options.random } : {}),
    });
  }

  /** Closes the slots' wake subscriber (at the executor's drain). */
  close(): Promise<void> {
    return this.slots.close();
  }

  /** A slot of `key` (scoped) if fewer than `limit` of its calls are in flight, never waiting in the process. */
  async acquire(key: string, limit: number, client: string, partition: string): Promise<SlotGrant> {
    const asked = await this.slots.acquire(key, limit, client, false, partition);
    if (!asked.granted) {
      metrics.waits.inc();
      return asked;
    }
    return { ...asked, concurrencyKey: key } as KeyGrant;
  }

  /**
   * Waits parked for a slot of `key` (scoped), which refused the task (its wait names the key and
   * limit: the refusal's, carried in the parked task's descriptor): the slot, or undefined once
   * `signal` aborts.
   */
  waitFor(
    key: string,
    limit: number,
    client: string | undefined,
    signal: AbortSignal,
    partition: string | undefined,
  ): Promise<KeyGrant | undefined> {
    metrics.waiting.inc();
    return this.slots
      .waitForSlot(key, () => limit, client, signal, partition)
      .then((grant) => (grant ? ({ ...grant, concurrencyKey: key } as KeyGrant) : undefined))
      .finally(() => metrics.waiting.dec());
  }
}

/** Concurrency keys over the deployment's Redis, their slots held at most as long as a call lasts. */
export function keyConcurrencyFromConfig(
  config: Pick<Config, 'redisPrefix' | 'targetConnectTimeout' | 'targetResponseTimeout'>,
  redis: RedisClient,
  logger?: Logger,
  weightOf?: (client: string) => number,
): KeyConcurrency {
  return new KeyConcurrency({
    redis,
    prefix: `${config.redisPrefix}:concurrency:`,
    leaseMs: longestCallMs(config),
    ...(logger ? { logger } : {}),
    ...(weightOf ? { weightOf } : {}),
  });
}
