/**
 * Flake hunting: runs the chosen test files (all of them by default) N times, one whole vitest run
 * after another, and ends with each file's failure count (`./dev test --repeat N [files]`). Each
 * run is its own vitest process, as in CI, so what one run leaves in a process (metrics, signal
 * handlers) cannot hide or cause a failure of the next. Exits 1 when any run failed.
 *
 *   node test/repeat.ts <N> [vitest run arguments: files, -t <name>, --project <name>...]
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/** What the vitest `json` reporter writes, the part read here. */
export interface JsonReport {
  testResults: Array<{
    name: string;
    status: string;
    message?: string;
    assertionResults: Array<{ fullName: string; status: string }>;
  }>;
}

/** One file over the runs: how often it ran and failed, and which of its tests failed how often. */
export interface FileTally {
  file: string;
  runs: number;
  failed: number;
  tests: Map<string, number>;
}

/**
 * Adds one run to `tallies`: its report (undefined: the run wrote none, e.g. vitest itself crashed)
 * and its exit code. A run that exits non-zero with no file failed (an unhandled error outside any
 * test, which vitest fails the run for) is counted as a failure of the run itself.
 */
export function addRun(
  tallies: Map<string, FileTally>,
  report: JsonReport | undefined,
  exitCode: number,
  root: string,
): void {
  let filesFailed = 0;
  for (const result of report?.testResults ?? []) {
    const tally = tallyOf(tallies, relative(root, result.name));
    tally.runs++;
    const failedTests = result.assertionResults.filter((t) => t.status === 'failed');
    if (result.status !== 'failed' && failedTests.length === 0) continue;
    filesFailed++;
    tally.failed++;
    // A file fails with no failed test when a hook or its import throws.
    const names = failedTests.length > 0 ? failedTests.map((t) => t.fullName) : ['(a hook or the import)'];
    for (const name of names) tally.tests.set(name, (tally.tests.get(name) ?? 0) + 1);
  }
  const run = tallyOf(tallies, RUN_ITSELF);
  run.runs++;
  if (report && (exitCode === 0 || filesFailed > 0)) return;
  run.failed++;
  const why = report
    ? `exit ${exitCode} with every file green: an error outside the tests`
    : 'no report written';
  run.tests.set(why, (run.tests.get(why) ?? 0) + 1);
}

/** The row of failures that are no file's (see addRun). */
export const RUN_ITSELF = '(the run itself)';

function tallyOf(tallies: Map<string, FileTally>, file: string): FileTally {
  let tally = tallies.get(file);
  if (!tally) {
    tally = { file, runs: 0, failed: 0, tests: new Map() };
    tallies.set(file, tally);
  }
  return tally;
}

/** The closing table: the files that failed first (most failures first), then a count of the rest. */
export function table(tallies: Map<string, FileTally>, runs: number): string {
  const all = [...tallies.values()];
  const failing = all
    .filter((t) => t.failed > 0)
    .sort((a, b) => b.failed - a.failed || a.file.localeCompare(b.file));
  const width = Math.max(4, ...failing.map((t) => t.file.length));
  const lines = failing.length > 0 ? [`${'file'.padEnd(width)}  failed/runs`] : [];
  for (const tally of failing) {
    lines.push(`${tally.file.padEnd(width)}  ${tally.failed}/${tally.runs}`);
    for (const [test, count] of [...tally.tests].sort((a, b) => b[1] - a[1]))
      lines.push(`${''.padEnd(width)}    ${count}× ${test}`);
  }
  const files = all.filter((t) => t.file !== RUN_ITSELF);
  const failed = files.filter((t) => t.failed > 0).length;
  lines.push(`${failed} of ${files.length} files failed at least once in ${runs} runs`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const [count, ...args] = process.argv.slice(2);
  const runs = Number(count);
  if (!Number.isInteger(runs) || runs < 1) {
    process.stderr.write('usage: node test/repeat.ts <N ≥ 1> [test files and other vitest run arguments]\n');
    process.exit(2);
  }
  const root = resolve(import.meta.dirname, '..');
  const dir = join(root, '.run', 'repeat', new Date().toISOString().replace(/[:.]/g, '-'));
  mkdirSync(dir, { recursive: true });
  const vitest = join(root, 'node_modules', '.bin', 'vitest');
  const tallies = new Map<string, FileTally>();
  for (let run = 1; run <= runs; run++) {
    const json = join(dir, `run-${run}.json`);
    const log = join(dir, `run-${run}.log`);
    const started = Date.now();
    // The default reporter's output goes to the run's log: N runs of it on the terminal would bury
    // the one line per run that says which files failed.
    const code = await runVitest(
      vitest,
      ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${json}`, ...args],
      log,
      root,
    );
    const report = readReport(json);
    addRun(tallies, report, code, root);
    const failedFiles = (report?.testResults ?? []).filter((r) => r.status === 'failed');
    const seconds = Math.round((Date.now() - started) / 1000);
    const outcome = !report
      ? `no report (exit ${code})`
      : failedFiles.length === 0
        ? `${report.testResults.length} files green`
        : `failed: ${failedFiles.map((r) => relative(root, r.name)).join(', ')}`;
    process.stdout.write(`run ${run}/${runs} (${seconds} s): ${outcome}; log ${relative(root, log)}\n`);
  }
  process.stdout.write(`\n${table(tallies, runs)}\n`);
  process.exit([...tallies.values()].some((t) => t.failed > 0) ? 1 : 0);
}

function runVitest(vitest: string, args: string[], log: string, cwd: string): Promise<number> {
  return new Promise((done, fail) => {
    const out = openSync(log, 'w');
    const child = spawn(vitest, args, { cwd, stdio: ['ignore', out, out] });
    child.on('error', fail);
    child.on('exit', (code, signal) => {
      closeSync(out);
      done(code ?? (signal ? 128 : 1));
    });
  });
}

function readReport(path: string): JsonReport | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as JsonReport;
  } catch {
    return undefined;
  }
}

if (import.meta.main) await main();
