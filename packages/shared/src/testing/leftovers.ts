import type { Redis } from 'ioredis';
import { createPg } from '../pg/index.ts';
import { createRedis } from '../redis/index.ts';
import { deleteFileTopics } from './topics.ts';

/**
 * What a benchmark leaves on the shared local stores unless it deletes it: a stack's Redis keys
 * (the ingress's requestId claims live an hour, hundreds of thousands of them after a load run)
 * and its database; its topics are registered where they are made (topics.ts). A suite run beside
 * them pays for them: a Redis of ~360,000 stray keys made every SCAN of a test slower. So bench
 * scripts register what they make here and delete it all when they exit (bench/harness.ts); test
 * files delete their own as they go.
 */
const prefixes = new Set<string>();
const databases = new Set<string>();

/** A Redis key prefix (every key under it) and a database URL to delete with `deleteLeftovers`. */
export function deleteAtExit(made: { redisPrefix?: string; databaseUrl?: string }): void {
  if (made.redisPrefix) prefixes.add(made.redisPrefix);
  if (made.databaseUrl) databases.add(made.databaseUrl);
}

export interface Leftovers {
  topics: number;
  keys: number;
  databases: number;
}

/**
 * Deletes what this process registered: its topics, every Redis key under its prefixes (one SCAN of
 * the shared Redis for all of them, UNLINK in batches) and its databases. Each store is tried even
 * when another is away; the first failure is thrown after the others were tried.
 */
export async function deleteLeftovers(redisUrl = 'redis://127.0.0.1:6379'): Promise<Leftovers> {
  const chosen = { prefixes: [...prefixes], databases: [...databases] };
  prefixes.clear();
  databases.clear();
  const [topics, keys, dropped] = await Promise.allSettled([
    deleteFileTopics(),
    deleteKeys(redisUrl, chosen.prefixes),
    dropDatabases(chosen.databases),
  ]);
  const failed = [topics, keys, dropped].find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  const count = (r: PromiseSettledResult<number>) => (r.status === 'fulfilled' ? r.value : 0);
  return { topics: count(topics), keys: count(keys), databases: count(dropped) };
}

async function deleteKeys(url: string, under: string[]): Promise<number> {
  if (under.length === 0) return 0;
  const redis = createRedis({ url }) as Redis; // one URL: a single node
  try {
    let deleted = 0;
    // One pass over the keyspace whatever the number of prefixes: a MATCH per prefix would read
    // every key once for each.
    for await (const batch of redis.scanStream({ count: 5_000 })) {
      const mine = (batch as string[]).filter((key) => under.some((prefix) => key.startsWith(prefix)));
      if (mine.length > 0) deleted += await redis.unlink(...mine);
    }
    return deleted;
  } finally {
    redis.disconnect();
  }
}

/** Drops the databases of these URLs (`with (force)`: their connections are ended), on the local server. */
export async function dropDatabases(urls: string[]): Promise<number> {
  if (urls.length === 0) return 0;
  const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
  try {
    for (const url of urls)
      await admin.unsafe(`drop database if exists "${new URL(url).pathname.slice(1)}" with (force)`);
    return urls.length;
  } finally {
    await admin.end({ timeout: 5 });
  }
}
