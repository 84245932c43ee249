// The response cache: KEYS cache keys shared by every VU, so after the first call of each key
// almost every answer is served from the cache (meta.cached) without reaching the target.
//   k6 run -e KEYS=10 k6/cache.ts
import { check } from 'k6';
import type { Options } from 'k6/options';
import { submitSync, TARGET, uniqueId } from './lib.ts';

const KEYS = Number(__ENV.KEYS || 10);
const RUN = Date.now().toString(36);

export const options: Options = {
  scenarios: {
    hits: { executor: 'constant-vus', vus: Number(__ENV.VUS || 20), duration: __ENV.DURATION || '30s' },
  },
  thresholds: { 'checks{check:cached}': ['rate>0.9'] },
};

export default function (): void {
  const key = `k6-cache-${RUN}-${Math.floor(Math.random() * KEYS)}`;
  const result = submitSync({
    request: { uri: `${TARGET}/echo`, method: 'POST', body: key },
    meta: { requestId: uniqueId('cache'), cache: { key, ttl: '5m' } },
  });
  if (result) check(result, { cached: (r) => r.meta.cached === true }, { check: 'cached' });
}
