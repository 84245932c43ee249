// The rate limiter under load: every request shares one limiter of LIMIT calls per second, sent
// sync at twice that rate. The calls that pass wait (meta.waitTime) instead of failing, and no
// answer is a 429 from Requester itself.
//   k6 run -e LIMIT=50 k6/rate-limiter.ts
import { check } from 'k6';
import type { Options } from 'k6/options';
import { submitSync, TARGET, uniqueId } from './lib.ts';

const LIMIT = Number(__ENV.LIMIT || 50);
const KEY = `k6-limiter-${Date.now().toString(36)}`;

export const options: Options = {
  scenarios: {
    overload: {
      executor: 'constant-arrival-rate',
      rate: LIMIT * 2,
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: LIMIT * 4,
    },
  },
  thresholds: { checks: ['rate>0.99'] },
};

export default function (): void {
  const result = submitSync({
    request: { uri: `${TARGET}/echo` },
    meta: {
      requestId: uniqueId('limiter'),
      limiter: { key: KEY, algorithm: 'token-bucket', rates: [{ duration: '1s', value: LIMIT }] },
    },
  });
  if (result) check(result, { 'the target answered 200': (r) => r.response.status === 200 });
}
