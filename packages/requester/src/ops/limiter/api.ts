import { UsageError } from '@requester/shared';
import type { AdminConsole } from '../../admin-server/console.ts';
import { clientOf } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { quotaArg, rateArg, showLimiter } from './index.ts';

/** The limiter key, its windows, whether it is an API key's rate, and whose key, of a query. */
export interface LimiterQuery {
  key: string;
  rates: string[];
  apiKey: boolean;
  client: string | undefined;
  /** The calendar quota's value, as the requests give it (text until shown). */
  quota: string;
}

export function limiterQuery(query: Record<string, string>): LimiterQuery {
  return {
    key: (query.key ?? '').trim(),
    client: clientOf(query.client),
    rates: (query.rate ?? '')
      .split(',')
      .map((r) => r.trim())
      .filter(Boolean),
    apiKey: query.apiKey === '1' || query.apiKey === 'true',
    quota: (query.quota ?? '').trim(),
  };
}

/** `client`: whose limiter key (a request's `meta.limiter.key` is its client's unless shared). */
export function showLimiterOf(console: AdminConsole, query: LimiterQuery) {
  return showLimiter(
    console.deps.redis(),
    console.config,
    query.key,
    query.rates.map(rateArg),
    query.apiKey,
    query.client,
    query.quota ? quotaArg(query.quota) : undefined,
  );
}

export const api: ApiFace = {
  paths: {
    '/admin/api/limiters': {
      get: {
        summary:
          "The windows and calendar quota of a limiter key (requester limiter show); `quota`: the quota's value; `client`: whose key (a request's limiter key is its client's, unless SHARED_LIMITER_KEYS declares it shared)",
        params: ['key', 'client', 'rate', 'apiKey', 'quota'],
      },
      post: undefined,
    },
  },
  routes(app, console) {
    app.get('/admin/api/limiters', async (c) => {
      const query = limiterQuery(c.req.query());
      if (!query.key) throw new UsageError('key is required');
      return c.json((await showLimiterOf(console, query)).views);
    });
  },
};
