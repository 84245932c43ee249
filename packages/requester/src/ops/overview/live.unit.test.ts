import { counter, gauge, histogram } from '@requester/shared/metrics';
import { describe, expect, it } from 'vitest';
import { LiveMetrics } from './live.ts';

/** The executor's metrics as it declares them (the registry keeps the first declaration). */
const executorMetrics = {
  tasks: counter('executor_tasks_total', 'tasks settled (test)', ['outcome']),
  httpSeconds: histogram('executor_http_seconds', 'calls (test)', ['outcome']),
  inFlight: gauge('executor_in_flight', 'tasks in flight (test)'),
};

describe('LiveMetrics', () => {
  it('reads the executor metrics and the consumer-lag gauges between two samples', async () => {
    const lag = gauge('live_test_consumer_lag', 'records behind (test)');
    const live = new LiveMetrics();
    lag.set(7);
    await live.sample();
    expect(live.latest()).toBeUndefined(); // a rate needs two samples
    executorMetrics.tasks.inc({ outcome: '2xx' }, 3);
    executorMetrics.httpSeconds.observe({ outcome: '2xx' }, 0.01);
    executorMetrics.httpSeconds.observe({ outcome: '2xx' }, 0.03);
    executorMetrics.inFlight.set(4);
    await live.sample();
    const sample = live.latest();
    expect(sample?.settledPerS).toBeGreaterThan(0);
    expect(sample?.latencyMeanMs).toBeCloseTo(20);
    expect(sample?.latencyP95Ms).toBe(50); // the bucket holding the 95th percentile (le 0.05 s)
    expect(sample?.inFlight).toBe(4);
    expect(sample?.lag).toBe(7);
  });
});
