import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  ALERT_TESTS,
  ALERTS,
  alertRules,
  DASHBOARD,
  dashboardExprs,
  missingSeries,
  parseExposition,
  promtool,
  ROOT,
  seriesOf,
} from './promql.ts';

/**
 * The alert rules and the Grafana dashboard, checked offline: promtool validates the rules and
 * runs their unit tests (infra/prometheus/alerts.test.yml), and the compose profile's provisioning
 * finds both. That every series they use exists on a running stack is metrics.test.ts.
 */
describe('alert rules (infra/prometheus/alerts.yml)', () => {
  it('pass promtool check rules', () => {
    const checked = promtool(['check', 'rules', ALERTS]);
    expect(checked.output).toContain('SUCCESS');
    expect(checked).toMatchObject({ ok: true });
  });

  it('pass their promtool unit tests, and every alert has one', () => {
    const tested = promtool(['test', 'rules', ALERT_TESTS]);
    expect(tested.output).toContain('SUCCESS');
    expect(tested.ok).toBe(true);
    const tests = readFileSync(ALERT_TESTS, 'utf8');
    for (const { alert } of alertRules()) expect(tests, alert).toContain(`alertname: ${alert}`);
  });

  it('cover absent and unready processes, crash loops, API 5xx, dropped journal events, queue age, in lag, error ratio, open breakers, dead letters and the outbox', () => {
    const used = new Set(alertRules().flatMap((r) => seriesOf(r.expr).map((s) => s.name)));
    const exprs = alertRules().map((r) => r.expr);
    expect(exprs.some((expr) => expr.startsWith('absent(up{'))).toBe(true);
    expect(exprs.some((expr) => expr.startsWith('up{'))).toBe(true);
    for (const name of [
      'requester_ready',
      'requester_kafka_consumer_crashes_total',
      'requester_http_requests_total',
      'requester_journal_events_dropped_total',
      'requester_queue_oldest_task_age_seconds',
      'requester_kafka_consumer_lag',
      'requester_executor_origin_calls_total',
      'requester_breaker_open_origins',
      'requester_executor_dead_letters_total',
      'requester_outbox_oldest_overdue_seconds',
    ])
      expect(used).toContain(name);
  });

  it('each link their section of docs/runbooks.md, and name commands that exist', () => {
    const runbooks = readFileSync(join(ROOT, 'docs/runbooks.md'), 'utf8');
    const anchors = new Set(
      [...runbooks.matchAll(/^## (\S+)$/gm)].map((m) => (m[1] as string).toLowerCase()),
    );
    const file = parse(readFileSync(ALERTS, 'utf8')) as {
      groups: Array<{ rules: Array<{ alert: string; annotations: Record<string, string> }> }>;
    };
    for (const rule of file.groups.flatMap((g) => g.rules)) {
      const url = rule.annotations.runbook_url ?? '';
      expect(url, rule.alert).toMatch(/\/docs\/runbooks\.md#[a-z]+$/);
      expect(anchors, rule.alert).toContain(url.split('#')[1]);
      expect(JSON.stringify(rule.annotations), rule.alert).not.toContain('requester queue dlq');
    }
  });

  it('have unit tests that fail when a rule changes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rq-prom-'));
    try {
      const rules = readFileSync(ALERTS, 'utf8');
      writeFileSync(join(dir, 'alerts.yml'), rules.replace('requester_ready == 0', 'requester_ready == 2'));
      copyFileSync(ALERT_TESTS, join(dir, 'alerts.test.yml'));
      const tested = promtool(['test', 'rules', join(dir, 'alerts.test.yml')]);
      expect(tested.ok).toBe(false);
      expect(tested.output).toContain('RequesterNotReady');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('are loaded by the compose Prometheus (promtool check config)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rq-prom-'));
    try {
      copyFileSync(ALERTS, join(dir, 'alerts.yml'));
      const config = readFileSync(join(ROOT, 'infra/compose/prometheus.yml'), 'utf8');
      expect(config).toContain('rule_files: [/etc/prometheus/alerts.yml]');
      writeFileSync(join(dir, 'prometheus.yml'), config.replace('/etc/prometheus/alerts.yml', 'alerts.yml'));
      const checked = promtool(['check', 'config', join(dir, 'prometheus.yml')]);
      expect(checked.output).toContain(`SUCCESS: ${alertRules().length} rules found`);
      expect(checked.ok).toBe(true);
      const compose = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
      expect(compose).toContain('./infra/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Grafana dashboard (infra/grafana/requester.json)', () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));

  it('is provisioned by the compose observability profile', () => {
    const provider = parse(
      readFileSync(join(ROOT, 'infra/compose/grafana/dashboards/requester.yml'), 'utf8'),
    );
    const path = provider.providers[0].options.path as string;
    const compose = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
    expect(compose).toContain(`./infra/grafana:${path}:ro`);
    expect(dashboard.uid).toBe('requester');
  });

  it('imports anywhere: a data source variable, no hard-coded uid, and namespace/pod filters on every query', () => {
    const variables = dashboard.templating.list as Array<{ name: string; type: string; query?: unknown }>;
    expect(variables.map((v) => [v.name, v.type])).toEqual([
      ['datasource', 'datasource'],
      ['namespace', 'query'],
      ['pod', 'query'],
    ]);
    const uids = JSON.stringify(dashboard.panels).match(/"uid":"([^"]+)"/g) ?? [];
    expect(uids.length).toBeGreaterThan(0);
    // Grafana's own `${variable}` syntax, not a template string.
    const variable = ['$', '{datasource}'].join('');
    expect(new Set(uids)).toEqual(new Set([`"uid":"${variable}"`]));
    for (const expr of dashboardExprs())
      for (const selector of expr.matchAll(
        /\brequester_[A-Za-z0-9_:]+\{([^}]*)\}|\brequester_[A-Za-z0-9_:]+(?![A-Za-z0-9_:{])/g,
      ))
        expect(selector[1] ?? '', expr).toContain('namespace=~"$namespace",pod=~"$pod"');
  });

  it('names every metric literally, each a requester_ one', () => {
    const exprs = dashboardExprs();
    expect(exprs.length).toBeGreaterThan(20);
    for (const expr of exprs) {
      expect(seriesOf(expr).length, expr).toBeGreaterThan(0);
      expect(expr).not.toContain('__name__');
    }
  });
});

describe('the PromQL and exposition parsing of these tests', () => {
  it('finds names and equality matchers, and reports what no sample satisfies', () => {
    const refs = seriesOf(
      'sum(rate(requester_a_total{outcome!~"2xx", state="dead"}[5m])) / max(requester_b) - requester_c_bucket',
    );
    expect(refs).toEqual([
      { name: 'requester_a_total', labels: { state: 'dead' } },
      { name: 'requester_b', labels: {} },
      { name: 'requester_c_bucket', labels: {} },
    ]);
    const samples = parseExposition(
      '# HELP x\nrequester_a_total{state="dead",outcome="5xx"} 1\nrequester_b 2\nrequester_c_count 3\n',
    );
    expect(missingSeries(refs, samples)).toEqual([{ name: 'requester_c_bucket', labels: {} }]);
    expect(missingSeries([{ name: 'requester_a_total', labels: { state: 'live' } }], samples)).toHaveLength(
      1,
    );
  });
});
