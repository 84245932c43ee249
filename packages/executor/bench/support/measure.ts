/**
 * What the executor bench measures besides throughput: CPU per part of the pipeline, bytes read,
 * Redis memory, the fetcher's record cache; and a watch on teardown steps that hang.
 *
 * @module
 */

import { readFileSync } from 'node:fs';
import type { Fetcher } from '@requester/shared/kafka';
import type { RedisClient } from '@requester/shared/redis';
import { processCpuSeconds } from '@requester/shared/testing';

/**
 * CPU time spent so far by each part of the pipeline: this process (executor, target, reader; all
 * its threads, and its main thread alone),
 * Redis, and the Kafka broker when its pid file is found. On a shared 2-core machine the
 * executor's rate is bounded by the CPU the three need per task, which wall-clock rates hide.
 */
export async function cpuMs(
  redis: RedisClient,
): Promise<{ node: number; main: number; redis: number; kafka: number | undefined }> {
  const { user, system } = process.cpuUsage();
  const thread = process.threadCpuUsage();
  const info = (await redis.info('cpu')).replace(/\r/g, '');
  const seconds = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return {
    node: (user + system) / 1000,
    main: (thread.user + thread.system) / 1000,
    redis: (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1000,
    kafka: brokerCpuMs(),
  };
}

/**
 * Bytes this process has read (`rchar` of /proc/self/io: sockets included): the `in` records the
 * fetcher receives, and the target's, the HTTP client's and the reader's reads of each body.
 */
export function bytesRead(): number {
  try {
    return Number(/^rchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** utime + stime of the local broker (infra/kafka.sh writes its pid), in ms; undefined elsewhere. */
function brokerCpuMs(): number | undefined {
  try {
    const runDir = process.env.REQUESTER_RUN_DIR ?? new URL('../../../../.run', import.meta.url).pathname;
    const seconds = processCpuSeconds(Number(readFileSync(`${runDir}/kafka/broker.pid`, 'utf8').trim()));
    return seconds === undefined ? undefined : seconds * 1000;
  } catch {
    return undefined;
  }
}

/** Redis `used_memory` (bytes): its delta over a publish is what the queued tasks take. */
export async function usedMemory(redis: RedisClient): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0);
}

/** The fetcher's record cache over a run: how many wanted records it answered, and its neighbours' fate. */
export function cacheLine(fetcher: Partial<Pick<Fetcher, 'cacheStats'>>): string {
  // The baseline tree's fetcher (run with this bench) has no counters.
  const stats = fetcher.cacheStats?.();
  if (!stats) return 'n/a';
  return (
    `hits ${stats.hits}, misses ${stats.misses}, neighbours kept ${stats.neighbours}, ` +
    `of which evicted unread ${stats.evictedUnread}`
  );
}

/** Awaits a teardown step, saying so on stderr when it takes more than 5 s (a hang, not noise). */
export async function slow<T>(label: string, step: Promise<T>): Promise<T> {
  const warn = setTimeout(() => console.error(`${label} has not finished after 5 s`), 5_000);
  try {
    return await step;
  } finally {
    clearTimeout(warn);
  }
}
