import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
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
import { eventually, freePort, startTarget, type Target } from '../../packages/shared/src/testing/index.ts';
import {
  alertRules,
  dashboardExprs,
  missingSeries,
  parseExposition,
  prometheusBinary,
  promtool,
  ROOT,
  type Sample,
  type SeriesRef,
  seriesOf,
} from './promql.ts';

/**
 * /metrics of a running stack (every role in one process) after a known workload — a success, a
 * retry that waits in the outbox, a dead letter, a limited request and a circuit breaker that
 * opens: it passes `promtool check metrics`, every series the dashboard and the alert rules use
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
  const post = async (body: unknown) => {
    const reply = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
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
    // Two failures open the breaker of the second origin; the third request finds it open.
    for (const id of ['obs-503-1', 'obs-503-2'])
      await post({ request: { uri: `${failing.url}/status/503?id=${id}` }, meta: { requestId: id } });
    for (const id of ['obs-503-1', 'obs-503-2']) await results.one(id, 30_000);
    await post({
      request: { uri: `${failing.url}/status/503?id=obs-503-3` },
      meta: { requestId: 'obs-503-3' },
    });
    for (const id of ['obs-ok', 'obs-after', 'obs-dead', 'obs-503-3']) await results.one(id, 60_000);

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
          totalOf(samples, settled.name) >= 6
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
    expect(value('requester_executor_end_to_end_seconds_count')).toBe(6);
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
    let prometheus: ChildProcess | undefined;
    let dir = '';

    afterAll(async () => {
      if (prometheus?.exitCode === null) {
        const exited = new Promise((resolve) => prometheus?.once('exit', resolve));
        prometheus.kill('SIGTERM');
        await exited;
      }
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 30_000);

    it('sees the role up and answers the KEDA query of infra/k8s', async () => {
      const binary = prometheusBinary('prometheus');
      dir = mkdtempSync(join(tmpdir(), 'rq-prometheus-'));
      const port = await freePort();
      const admin = new URL(stack.adminUrl);
      writeFileSync(
        join(dir, 'prometheus.yml'),
        [
          'global: { scrape_interval: 1s, evaluation_interval: 1s }',
          'scrape_configs:',
          '  - job_name: requester',
          `    static_configs: [{ targets: ["${admin.host}"], labels: { role: all } }]`,
          '',
        ].join('\n'),
      );
      prometheus = spawn(
        binary,
        [
          `--config.file=${join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
        ],
        { stdio: 'ignore' },
      );
      interface ApiData {
        activeTargets?: Array<{ health: string }>;
        result?: Array<{ value: [number, string] }>;
      }
      const api = async (path: string): Promise<ApiData | undefined> => {
        const reply = await fetch(`http://127.0.0.1:${port}/api/v1/${path}`).catch(() => undefined);
        return reply?.ok ? ((await reply.json()) as { data: ApiData }).data : undefined;
      };
      await eventually(
        async () => (await api('targets'))?.activeTargets?.some((t) => t.health === 'up') ?? false,
        30_000,
        'the stack up in Prometheus',
      );
      const query = kedaQuery();
      expect(query).toBe('max(requester_queue_depth{state="pending"})');
      let result: Array<{ value: [number, string] }> = [];
      await eventually(
        async () => {
          result = (await api(`query?query=${encodeURIComponent(query)}`))?.result ?? [];
          return result.length > 0;
        },
        30_000,
        query,
      );
      expect(Number(result[0]?.value[1])).toBeGreaterThanOrEqual(0);
    }, 90_000);
  });
});

/** The Prometheus query the executors' KEDA ScaledObject scales on. */
function kedaQuery(): string {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'infra/k8s/base/executor.yaml'), 'utf8'));
  for (const doc of docs) {
    const object = doc.toJSON() as {
      kind?: string;
      spec?: { triggers?: Array<{ type: string; metadata: { query?: string } }> };
    };
    const trigger =
      object?.kind === 'ScaledObject'
        ? object.spec?.triggers?.find((t) => t.type === 'prometheus')
        : undefined;
    if (trigger?.metadata?.query) return trigger.metadata.query;
  }
  throw new Error('no prometheus trigger in infra/k8s/base/executor.yaml');
}

/** The sum of the samples of `name` that carry `labels`. */
function totalOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}
