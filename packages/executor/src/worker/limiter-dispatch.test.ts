import { randomBytes } from 'node:crypto';
import { RateLimiter } from '@requester/policies';
import { parseRequestEnvelope } from '@requester/shared/contract';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { silentLogger, startTarget, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpClient, type HttpClient } from '../http/index.ts';
import { type Outcome, Policies, type Progress } from './policies.ts';

/**
 * Two executors share a `sliding-window-log` of 1 call per second; one of them is slow to send
 * (400 ms between its limiter decision and its call: a busy event loop, a slow connection). The
 * instants the calls were handed to the socket (the instants the limiter counts them at) must be
 * a whole window apart. Counted at the decision instead, the fast executor's call would go ~600 ms
 * after the slow one's. No bound on time but the limit itself: a slower machine only spreads
 * the calls further.
 */
describe('a sliding-log limit counts calls by send time, across executors of different dispatch gaps', () => {
  const WINDOW_MS = 1_000;
  const SLOW_MS = 400;
  let redis: RedisClient;
  let target: Target;
  let http: HttpClient;
  const sentAt = new Map<string, number>();

  beforeAll(async () => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    target = await startTarget();
    http = createHttpClient({
      connectTimeoutMs: 5_000,
      responseTimeoutMs: 30_000,
      maxResponseBytes: 1 << 20,
      followRedirects: false,
      allowPrivateTargets: ['127.0.0.1'],
    });
  });
  afterAll(async () => {
    http.close();
    await target.close();
    redis.disconnect();
  });

  /** An executor whose calls leave `delayMs` after its gate, noting when each was handed to the socket. */
  const executor = (limiter: RateLimiter, delayMs: number) => {
    const client: HttpClient = {
      ...http,
      call: async (request, egress, hooks) => {
        if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
        return http.call(request, egress, {
          sent: () => {
            sentAt.set(new URL(request.uri).searchParams.get('id') ?? '', performance.now());
            hooks?.sent?.();
          },
        });
      },
    };
    return new Policies({ http: client, limiter, retryAfterMaxMs: 60_000 });
  };

  /** Attempts until the task ends, sleeping through each limiter wait as the queue would. */
  async function deliver(policies: Policies, id: string, limiterKey: string): Promise<Outcome> {
    const envelope = parseRequestEnvelope({
      request: { uri: `${target.url}/echo?id=${id}` },
      meta: {
        requestId: id,
        limiter: { key: limiterKey, algorithm: 'sliding-window-log', rates: [{ duration: '1s', value: 1 }] },
      },
    });
    let progress: Progress = { tryCount: 0, waitedMs: 0 };
    for (;;) {
      const ending = await policies.attempt(envelope, progress, silentLogger);
      if (ending.kind === 'result') return ending;
      progress = ending.progress;
      await new Promise((resolve) => setTimeout(resolve, ending.delayMs));
    }
  }

  it(`the slow executor's call and the fast one's are sent ${WINDOW_MS} ms apart or more`, async () => {
    const prefix = `t:${randomBytes(6).toString('hex')}:`;
    const limiter = new RateLimiter({ redis, prefix });
    const key = `dispatch-${randomBytes(4).toString('hex')}`;
    const slow = executor(limiter, SLOW_MS);
    const fast = executor(limiter, 0);
    const first = deliver(slow, 'slow', key);
    // The fast executor asks once the slow one holds the slot (its entry is in the log).
    const log = `${prefix}{lim:${key}}:sl`;
    while ((await redis.zcard(log)) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const second = deliver(fast, 'fast', key);
    const endings = await Promise.all([first, second]);
    for (const ending of endings)
      expect(ending).toMatchObject({ kind: 'result', result: { response: { status: 200 } } });
    expect(sentAt.get('fast')! - sentAt.get('slow')!).toBeGreaterThanOrEqual(WINDOW_MS);
    await redis.del(log);
  });
});
