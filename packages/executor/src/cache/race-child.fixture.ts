/**
 * Test fixture (not production code): another executor process for the cross-process tests of
 * index.test.ts. `node race-child.fixture.ts <prefix> <cache key> <target url> <fetches>` connects, prints
 * `ready`, waits for a line on stdin, runs the fetches concurrently through its own ResponseCache,
 * prints their results as one JSON line and exits.
 */
import { once } from 'node:events';
import { createRedis } from '@requester/shared/redis';
import { createHttpClient } from '../http/index.ts';
import { ResponseCache, requestIdentity } from './index.ts';

const [prefix = '', key = '', uri = '', fetches = '1'] = process.argv.slice(2);
const redis = createRedis({ url: 'redis://127.0.0.1:6379', connectionName: 'cache-race-child' });
const cache = new ResponseCache({ redis, prefix, waitBudgetMs: 30_000 });
const http = createHttpClient({
  connectTimeoutMs: 5_000,
  responseTimeoutMs: 30_000,
  maxResponseBytes: 1024 * 1024,
  followRedirects: false,
  allowPrivateTargets: ['127.0.0.1'],
});

await redis.ping();
process.stdout.write('ready\n');
await once(process.stdin, 'data');
const request = requestIdentity({ method: 'GET', uri });
const results = await Promise.all(
  Array.from({ length: Number(fetches) }, () =>
    cache.fetchThrough({ key, ttl: '1m', request }, () => http.call({ method: 'GET', uri, headers: {} })),
  ),
);
const summary = results.map(({ cached, outcome }) => ({
  cached,
  status: outcome.kind === 'response' ? outcome.status : outcome.error.code,
  body: outcome.kind === 'response' ? outcome.body : '',
}));
process.stdout.write(`${JSON.stringify(summary)}\n`);
http.close();
await cache.close();
await redis.quit();
