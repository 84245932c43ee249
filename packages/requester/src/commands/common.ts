import { hostname, userInfo } from 'node:os';
import type { Config } from '@requester/shared/config';
import type { Argv } from 'yargs';

/**
 * What every admin subcommand uses, apart from the registry in index.ts (which imports the
 * subcommand modules, so they cannot import it back without a cycle). Light on purpose: the
 * commands' definitions (what --help prints) import it; the clients a command works with are made
 * by ./clients.ts, which only the implementations import.
 *
 * The output rule of every admin command: stdout carries the result only — a table for people,
 * or with `--json` exactly one JSON document for programs; progress, notices and logs go to stderr.
 */

/** How a subcommand reads its configuration: environment, then its parsed flags. */
export type ConfigFrom = (argv: Record<string, unknown>) => Config;

/**
 * Who runs an admin command, as operator actions record it: `cli:<CLI_ACTOR>` when set (validated
 * by the config schema; read here so that every call site stays as it is), else
 * `cli:<os user>@<host name>`. In a container the user is always the image's (`node`), so the
 * host name (the pod's or container's name) is what tells one exec from another.
 */
export function cliActor(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CLI_ACTOR) return `cli:${env.CLI_ACTOR}`;
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry for the uid (an arbitrary uid in a container): the host name still tells.
  }
  return `cli:${user}@${hostname()}`;
}

/** One line of progress or notice on stderr. */
export function progress(message: string): void {
  process.stderr.write(`requester: ${message}\n`);
}

/** Progress of a long operation on stderr: one line rewritten in place on a terminal, else a line now and then. */
export function progressCounter(label: string, unit: string): (done: number, total: number) => void {
  const line = (done: number, total: number) => `requester ${label}: ${unit} ${done}/${total}`;
  if (process.stderr.isTTY)
    return (done, total) => process.stderr.write(`\r${line(done, total)}${done === total ? '\n' : ''}`);
  return throttled((done, total) => process.stderr.write(`${line(done, total)}\n`));
}

/** `report`, called at most once a second, and always for the last step (done = total). */
export function throttled(
  report: (done: number, total: number) => void,
): (done: number, total: number) => void {
  let last = 0;
  return (done, total) => {
    const now = Date.now();
    if (done < total && now - last < 1_000) return;
    last = now;
    report(done, total);
  };
}

/** The `--json` flag, the same on every admin command. */
export function withJson<T>(y: Argv<T>): Argv<T & { json: boolean }> {
  return y.option('json', {
    type: 'boolean',
    default: false,
    describe: 'one JSON document on stdout instead of a table (progress and logs stay on stderr)',
  });
}

/** The `--reveal` flag of the commands that print requests (dlq list, queue dead list). */
export function withReveal<T>(y: Argv<T>): Argv<T & { reveal: boolean }> {
  return y.option('reveal', {
    type: 'boolean',
    default: false,
    describe:
      '--json: show the requests in full (credentials, bodies, proxyData; hidden otherwise), ' +
      'recorded as an admin action of cli:<user> in the journal of each request shown',
  });
}

/** Exit codes, shown under every command's --help. */
export const EXIT_CODES_HELP =
  'Exit codes: 0 done; 1 failed at run time (a dependency that does not answer is named); ' +
  '2 bad usage or configuration (the flag or variable is named).';

/** The machine output of a command: one JSON document on stdout. */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export type Cell = string | number | boolean | null | undefined;

/**
 * A table for people: a header, aligned columns (numbers to the right), no index column. An empty
 * table prints `(none)` so that "nothing" is visibly an answer.
 */
export function formatTable(rows: ReadonlyArray<Record<string, Cell>>, columns?: readonly string[]): string {
  const names = columns ?? [...new Set(rows.flatMap((r) => Object.keys(r)))];
  if (rows.length === 0) return '(none)\n';
  const text = (cell: Cell) => (cell === null || cell === undefined ? '-' : String(cell));
  const numeric = names.map((name) => rows.every((r) => typeof r[name] === 'number' || r[name] == null));
  const headers = names.map((name) => name.replace(/([a-z])([A-Z])/g, '$1 $2').toUpperCase());
  const widths = names.map((name, i) =>
    Math.max(headers[i]?.length ?? 0, ...rows.map((r) => text(r[name]).length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (numeric[i] ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map((r) => line(names.map((n) => text(r[n]))))].join('\n')}\n`;
}

export function printTable(rows: ReadonlyArray<Record<string, Cell>>, columns?: readonly string[]): void {
  process.stdout.write(formatTable(rows, columns));
}

/** `name  value` lines for one record (a summary), keys aligned. */
export function printFields(fields: Record<string, Cell>): void {
  const width = Math.max(...Object.keys(fields).map((k) => k.length));
  for (const [key, value] of Object.entries(fields))
    process.stdout.write(`${key.padEnd(width)}  ${value === null || value === undefined ? '-' : value}\n`);
}
