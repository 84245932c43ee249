import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { eventually, freePort } from '../../packages/shared/src/testing/index.ts';

/** What the observability tests share: the files under test, promtool, and PromQL/exposition parsing. */
export const ROOT = join(import.meta.dirname, '../..');
export const DASHBOARD = join(ROOT, 'infra/grafana/requester.json');
export const ALERTS = join(ROOT, 'infra/prometheus/alerts.yml');
export const ALERT_TESTS = join(ROOT, 'infra/prometheus/alerts.test.yml');

const INSTALL_HINT =
  "it comes from Debian's prometheus package: run `bash infra/promtool.sh` (./dev test does) or `apt-get install -y prometheus`";

/** The path of a Prometheus binary (`promtool`, `prometheus`); throws, saying how to install it, when missing. */
export function prometheusBinary(name: 'promtool' | 'prometheus'): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const candidate = join(dir || '.', name);
    try {
      execFileSync(candidate, ['--version'], { stdio: 'ignore' });
      return candidate;
    } catch {}
  }
  throw new Error(`${name} is not installed: ${INSTALL_HINT}`);
}

/** Runs promtool; returns its exit status and output (stdout and stderr together). */
export function promtool(args: string[], input?: string): { ok: boolean; output: string } {
  try {
    const output = execFileSync(prometheusBinary('promtool'), args, {
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(input === undefined ? {} : { input }),
    });
    return { ok: true, output };
  } catch (err) {
    const {
      stdout = '',
      stderr = '',
      message,
    } = err as { stdout?: string; stderr?: string; message: string };
    if (!stdout && !stderr) throw err;
    return { ok: false, output: `${stdout}${stderr}` || message };
  }
}

interface Panel {
  targets?: Array<{ expr?: string }>;
  panels?: Panel[];
}

/** Every PromQL expression of the dashboard's panels. */
export function dashboardExprs(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] };
  const walk = (panels: Panel[]): string[] =>
    panels.flatMap((p) => [
      ...(p.targets ?? []).flatMap((t) => (t.expr ? [t.expr] : [])),
      ...walk(p.panels ?? []),
    ]);
  return walk(dashboard.panels);
}

export interface AlertRule {
  alert: string;
  expr: string;
}

export function alertRules(): AlertRule[] {
  const file = parse(readFileSync(ALERTS, 'utf8')) as { groups: Array<{ rules: AlertRule[] }> };
  return file.groups.flatMap((g) => g.rules);
}

export interface SeriesRef {
  name: string;
  /** The label equality matchers of the selector (`=` only: what must exist). */
  labels: Record<string, string>;
}

/**
 * The series an expression selects: `requester_*` metric names with their `label="value"`
 * matchers. Our expressions name every metric literally (no `{__name__=~…}`), which the test of
 * this parser holds them to.
 */
export function seriesOf(expr: string): SeriesRef[] {
  const refs: SeriesRef[] = [];
  for (const match of expr.matchAll(/\b(requester_[A-Za-z0-9_:]+)\s*(?:\{([^}]*)\})?/g)) {
    const labels: Record<string, string> = {};
    for (const m of (match[2] ?? '').matchAll(
      /([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"/g,
    ))
      if (m[2] === '=') labels[m[1] as string] = m[3] as string;
    refs.push({ name: match[1] as string, labels });
  }
  return refs;
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition. */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const m of (match[2] ?? '').matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[m[1] as string] = m[2] as string;
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The references no sample satisfies (its name, with every equality matcher). */
export function missingSeries(refs: SeriesRef[], samples: Sample[]): SeriesRef[] {
  return refs.filter(
    (ref) =>
      !samples.some(
        (s) => s.name === ref.name && Object.entries(ref.labels).every(([k, v]) => s.labels[k] === v),
      ),
  );
}

/** A real Prometheus on 127.0.0.1, scraping the given targets every second. */
export interface RunningPrometheus {
  /** The values of an instant query, one per series (empty when it selects nothing). */
  query(expr: string): Promise<number[]>;
  stop(): Promise<void>;
}

/**
 * Starts Debian's `prometheus` on a free port with one scrape job whose targets carry `labels`
 * (e.g. the `namespace` a PodMonitor adds), and waits until every target is up.
 */
export async function startPrometheus(
  targets: string[],
  labels: Record<string, string>,
): Promise<RunningPrometheus> {
  const binary = prometheusBinary('prometheus');
  const dir = mkdtempSync(join(tmpdir(), 'rq-prometheus-'));
  const port = await freePort();
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s }',
      'scrape_configs:',
      '  - job_name: requester',
      `    static_configs: [{ targets: ${JSON.stringify(targets)}, labels: ${JSON.stringify(labels)} }]`,
      '',
    ].join('\n'),
  );
  const child = spawn(
    binary,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const api = async (path: string) => {
    const reply = await fetch(`http://127.0.0.1:${port}/api/v1/${path}`).catch(() => undefined);
    return reply?.ok
      ? (
          (await reply.json()) as {
            data: { activeTargets?: Array<{ health: string }>; result?: Array<{ value: [number, string] }> };
          }
        ).data
      : undefined;
  };
  try {
    await eventually(
      async () => {
        const active = (await api('targets'))?.activeTargets ?? [];
        return active.length === targets.length && active.every((t) => t.health === 'up');
      },
      30_000,
      'every target up in Prometheus',
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    query: async (expr) =>
      ((await api(`query?query=${encodeURIComponent(expr)}`))?.result ?? []).map((r) => Number(r.value[1])),
    stop,
  };
}
