// Retries with backoff: each request names its own flaky key on the target, which fails FAILURES
// times (503) before answering 200. With retry.max above FAILURES every result is a 200 after
// FAILURES + 1 attempts.
//   k6 run -e FAILURES=2 k6/retries.ts
import { check } from 'k6';
import type { Options } from 'k6/options';
import { submitSync, TARGET, uniqueId } from './lib.ts';

const FAILURES = Number(__ENV.FAILURES || 2);

export const options: Options = {
  scenarios: {
    flaky: { executor: 'constant-vus', vus: Number(__ENV.VUS || 20), duration: __ENV.DURATION || '30s' },
  },
  thresholds: { checks: ['rate>0.99'] },
};

export default function (): void {
  const id = uniqueId('retry');
  const result = submitSync({
    request: { uri: `${TARGET}/flaky/${id}/${FAILURES}` },
    meta: { requestId: id, retry: { max: FAILURES + 1, delay: '50ms', maxDelay: '1s', jitter: 0.2 } },
  });
  if (result)
    check(result, {
      'answered 200 after the failures': (r) => r.response.status === 200,
      'tried FAILURES + 1 times': (r) => r.meta.tryCount === FAILURES + 1,
    });
}
