// Maximum accepted rate of the HTTP API: async requests at a rising arrival rate until the
// ingress cannot keep up (dropped iterations, failed requests).
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e TARGET=http://127.0.0.1:9000 -e RATE_MAX=5000 k6/max-rps.ts
import type { Options } from 'k6/options';
import { accepted, submit, TARGET, uniqueId } from './lib.ts';

const RATE_MAX = Number(__ENV.RATE_MAX || 5000);

export const options: Options = {
  scenarios: {
    ramp: {
      executor: 'ramping-arrival-rate',
      startRate: 100,
      timeUnit: '1s',
      preAllocatedVUs: 100,
      maxVUs: 500,
      stages: [
        { target: RATE_MAX, duration: __ENV.RAMP || '60s' },
        { target: RATE_MAX, duration: __ENV.HOLD || '30s' },
      ],
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.001'],
    'http_req_duration{kind:async}': ['p(99)<100'],
  },
};

export default function (): void {
  const res = submit(
    {
      request: { uri: `${TARGET}/echo`, method: 'POST', body: 'x'.repeat(100) },
      meta: { requestId: uniqueId('rps') },
    },
    { kind: 'async' },
  );
  accepted(res);
}
