// Load test of the HTTP API with k6 (https://k6.io), for machines that have it:
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e TARGET=http://127.0.0.1:9000/echo \
//     -e API_KEY="$(cat .run/local-api-key)" k6/submit.js
// API_KEY: a key with --sync (./dev start makes one), unless the server runs with AUTH=off.
// Each iteration submits one async request (a wake-up when TARGET is empty) and, for a tenth of
// them, a sync one. Thresholds: no 5xx from the ingress, p95 of the 202 under 50 ms.
// k6 is not on this project's CI machine (no registry ships it): the in-repo benchmarks are scripts
// under packages/*/bench and write to BENCHMARKS.md.

import { check } from 'k6';
import http from 'k6/http';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const TARGET = __ENV.TARGET || '';
const AUTH = __ENV.API_KEY ? { authorization: `Bearer ${__ENV.API_KEY}` } : {};

export const options = {
  scenarios: {
    submit: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 500),
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: 50,
    },
  },
  thresholds: {
    'http_req_failed{kind:async}': ['rate<0.001'],
    'http_req_duration{kind:async}': ['p(95)<50'],
  },
};

export default function () {
  const id = `k6-${__VU}-${__ITER}`;
  const sync = __ITER % 10 === 0;
  const body = JSON.stringify({
    request: { uri: TARGET, method: TARGET ? 'POST' : 'GET', body: '{"k6":true}' },
    meta: { requestId: id, sync, proxyData: { vu: __VU } },
  });
  const res = http.post(`${BASE_URL}/request`, body, {
    headers: Object.assign({ 'content-type': 'application/json' }, AUTH),
    tags: { kind: sync ? 'sync' : 'async' },
  });
  check(res, { accepted: (r) => (sync ? r.status === 200 || r.status === 202 : r.status === 202) });
}
