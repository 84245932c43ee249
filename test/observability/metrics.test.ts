import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../packages/requester/src/runtime/index.ts';
import {
  dropStackDatabase,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from '../../packages/requester/test/e2e/stack.fixture.ts';
import { eventually, startTarget, type Target } from '../../packages/shared/src/testing/index.ts';
import {
  alertRules,
  dashboardExprs,
  missingSeries,
  parseExposition,
  promtool,
  type RunningPrometheus,
  type Sample,
  type SeriesRef,
  seriesOf,
  startPrometheus,
} from './promql.ts';

/**
 * /metrics of a running stack (every role in one process) after a known workload — a success, a
 * retry that waits in the outbox, a dead letter, a limited request, a circuit breaker that
 * opens and a call to a destination: it passes `promtool check metrics`, every series the dashboard and the alert rules use
 * exists, and a real Prometheus scrapes it.
 */
describe('metrics of a running stack', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  /** A second origin, whose breaker the workload opens (the first stays closed for the rest). */
  let failing: Target;
  let results: ResultCollector;
  let headers: Record<string, string>;
  let exposition = '';

  const used: SeriesRef[] = [...dashboardExprs(), ...alertRules().map((r) => r.expr)].flatMap(seriesOf);
  const scrape = async () => (await fetch(`${stack.adminUrl}/metrics`)).text();
  /** A second client: an origin's breaker opens when the calls of several clients fail (an outage). */
  let otherHeaders: Record<string, string>;
  const post = async (body: unknown, as: Record<string, string> = headers) => {
    const reply = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...as },
      body: JSON.stringify(body),
    });
    expect(reply.status).toBe(202);
  };

  beforeAll(async () => {
    [target, failing] = [await startTarget(), await startTarget()];
    stack = await stackEnv({
      REDIS_HORIZON: '1s',
      METRICS_SAMPLE_INTERVAL: '200ms',
      BREAKER_FAILURE_THRESHOLD: '2',
      BREAKER_OPEN_DURATION: '3s',
    });
    running = await startStack(stack);
    await waitReady(stack);
    headers = (await stackKey(stack)).headers;
    otherHeaders = (await stackKey(stack)).headers;
    results = new ResultCollector(stack.config.topicOut);
    await results.start();

    const limiter = {
      key: 'obs-lim',
      algorithm: 'sliding-window-log',
      rates: [{ duration: '1s', value: 5 }],
    };
    await post({ request: { uri: `${target.url}/echo?id=obs-ok` }, meta: { requestId: 'obs-ok', limiter } });
    // 429 with a Retry-After beyond the 1 s horizon: the retry waits in the outbox.
    await post({
      request: { uri: `${target.url}/flaky/obs-after/1?status=429&retry-after=2` },
      meta: { requestId: 'obs-after', retry: { max: 3, delay: '100ms' } },
    });
    await post({
      request: { uri: `${target.url}/status/404?id=obs-dead` },
      meta: { requestId: 'obs-dead', retry: { max: 3 } },
    });
    // Two failures, of two clients, open the breaker of the second origin; the third request finds it open.
    await post({
      request: { uri: `${failing.url}/status/503?id=obs-503-1` },
      meta: { requestId: 'obs-503-1' },
    });
    await post(
      { request: { uri: `${failing.url}/status/503?id=obs-503-2` }, meta: { requestId: 'obs-503-2' } },
      otherHeaders,
    );
    for (const id of ['obs-503-1', 'obs-503-2']) await results.one(id, 30_000);
    await post({
      request: { uri: `${failing.url}/status/503?id=obs-503-3` },
      meta: { requestId: 'obs-503-3' },
    });
    // A call to a destination: its per-destination series (calls, latency, sampled gauges).
    const operator = await stackKey(stack, { admin: 'write' });
    const created = await fetch(`${stack.adminUrl}/admin/api/destinations/create`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operator.headers },
      body: JSON.stringify({ name: 'obs-dest', spec: { baseUrl: target.url } }),
    });
    expect(created.status, await created.text()).toBe(200);
    await post({
      request: { uri: '/echo?id=obs-dest' },
      meta: { requestId: 'obs-dest', destination: 'obs-dest' },
    });
    for (const id of ['obs-ok', 'obs-after', 'obs-dead', 'obs-503-3', 'obs-dest'])
      await results.one(id, 60_000);

    // The samplers run every 200 ms, and an executor counts a result just after Kafka has it:
    // wait for both once the workload is done.
    await eventually(
      async () => {
        exposition = await scrape();
        const samples = parseExposition(exposition);
        const settled = samples.find((s) => s.name === 'requester_executor_end_to_end_seconds_count');
        return (
          missingSeries(used, samples).length === 0 &&
          settled !== undefined &&
          totalOf(samples, settled.name) >= 7
        );
      },
      20_000,
      'every series the dashboard and alerts use',
    ).catch(() => undefined); // the assertion below names what is missing
  }, 180_000);

  afterAll(async () => {
    await results?.stop();
    await running?.shutdown('test over');
    await Promise.all([target?.close(), failing?.close()]);
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('has every series the dashboard and the alert rules use', () => {
    expect(used.length).toBeGreaterThan(30);
    expect(missingSeries(used, parseExposition(exposition))).toEqual([]);
  });

  it('passes promtool check metrics', () => {
    const checked = promtool(['check', 'metrics'], exposition);
    expect(checked.output.trim()).toBe('');
    expect(checked.ok).toBe(true);
  });

  it('tells an open breaker from a busy one, and measures the workload', () => {
    const samples = parseExposition(exposition);
    const value = (name: string, labels: Record<string, string> = {}) => totalOf(samples, name, labels);
    expect(value('requester_executor_tasks_total', { outcome: 'circuit_open' })).toBeGreaterThan(0);
    expect(value('requester_breaker_rejected_total', { state: 'open' })).toBeGreaterThan(0);
    expect(value('requester_executor_dead_letters_total', { reason: 'permanent' })).toBe(1);
    expect(value('requester_executor_end_to_end_seconds_count')).toBe(7);
    // The destination's call, counted under its name alone.
    expect(
      value('requester_executor_destination_calls_total', { destination: 'obs-dest', outcome: '2xx' }),
    ).toBe(1);
    // The retry after 2 s went through the outbox: one result took at least 2 s end to end.
    expect(value('requester_executor_end_to_end_seconds_bucket', { le: '1' })).toBeLessThan(
      value('requester_executor_end_to_end_seconds_count'),
    );
    expect(value('requester_relay_moved_total')).toBeGreaterThanOrEqual(1);
    const origins = new Set(
      samples.filter((s) => s.name === 'requester_executor_origin_calls_total').map((s) => s.labels.origin),
    );
    expect(origins).toEqual(new Set([new URL(target.url).origin, new URL(failing.url).origin]));
    expect(value('requester_breaker_open_origins')).toBe(1);
    for (const name of [
      'nodejs_active_handles_total',
      'nodejs_active_requests_total',
      'nodejs_active_resources_total',
    ])
      expect(samples.some((s) => s.name === `requester_${name}`)).toBe(false);
  });

  describe('scraped by a real Prometheus', () => {
    let prometheus: RunningPrometheus | undefined;
    afterAll(async () => prometheus?.stop(), 30_000);

    it('sees the role up and reads every series the alert rules use', async () => {
      prometheus = await startPrometheus([new URL(stack.adminUrl).host], { role: 'all' });
      // The autoscaling queries are tested in keda.test.ts; here every rule's series is scraped.
      for (const ref of alertRules().flatMap((rule) => seriesOf(rule.expr))) {
        const selector = `${ref.name}{${Object.entries(ref.labels)
          .map(([k, v]) => `${k}="${v}"`)
          .join(',')}}`;
        let values: number[] = [];
        await eventually(
          async () => {
            values = await prometheus!.query(selector);
            return values.length > 0;
          },
          30_000,
          selector,
        );
      }
    }, 90_000);
  });
});

/** The sum of the samples of `name` that carry `labels`. */
function totalOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}
