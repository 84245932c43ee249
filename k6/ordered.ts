// Ordered partitions at scale: PARTITIONS ordered keys (`!k6-...`), each receiving its requests in
// sequence. The target records the arrival order (the `seq` in the body); the e2e suite proves the
// order, this scenario measures the rate with many partitions and a slow-ish target.
//   k6 run -e PARTITIONS=10000 -e TARGET=http://127.0.0.1:9000 k6/ordered.ts
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import { accepted, submit, TARGET, uniqueId } from './lib.ts';

const PARTITIONS = Number(__ENV.PARTITIONS || 10000);
const RUN = Date.now().toString(36);

export const options: Options = {
  scenarios: {
    ordered: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 1000),
      timeUnit: '1s',
      duration: __ENV.DURATION || '60s',
      preAllocatedVUs: 100,
    },
  },
  thresholds: { http_req_failed: ['rate<0.001'] },
};

export default function (): void {
  const seq = exec.scenario.iterationInTest;
  const partition = `!k6-${RUN}-${seq % PARTITIONS}`;
  const res = submit({
    request: { uri: `${TARGET}/random-delay/20`, method: 'POST', body: JSON.stringify({ partition, seq }) },
    meta: { requestId: uniqueId('ordered'), partition },
  });
  accepted(res);
}
