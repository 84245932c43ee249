import { type ParseArgsOptionDescriptor, parseArgs } from 'node:util';

/**
 * The command line of a benchmark script: node's `parseArgs`, plus `--help` and errors a person
 * can read. It lives here (test-only, never imported by the runtime) so that the scripts under
 * `bench/` and under `packages/<name>/bench/` use one helper without a package importing another.
 */
export type BenchOption = ParseArgsOptionDescriptor & {
  /** What the option does, for `--help` (its default is printed beside it). */
  help: string;
  /** The value's placeholder in `--help` (default `<value>`); ignored for booleans. */
  value?: string;
  /** The value must be a finite number: anything else exits 2 before the bench starts. */
  number?: boolean;
};

export interface BenchArgsSpec<O extends Record<string, BenchOption>> {
  /** What the bench measures and how it is run (the script's header comment); `--help` prints it first. */
  usage: string;
  options: O;
  /** Placeholders of the positional arguments (e.g. `<file.cpuprofile>`); none allowed without it. */
  positionals?: string;
  /** The arguments to read (default: `process.argv` after the script); a leading `--` (pnpm's) is dropped. */
  args?: string[];
}

type Parsed<O extends Record<string, BenchOption>> = ReturnType<
  typeof parseArgs<{ options: O; allowPositionals: true; args: string[] }>
>;

export type BenchArgs<O extends Record<string, BenchOption>> = {
  values: Parsed<O>['values'];
  positionals: string[];
};

/** What reading the arguments came to: the values, or the text to print and the exit code. */
export type BenchArgsOutcome<O extends Record<string, BenchOption>> =
  | ({ exit?: undefined } & BenchArgs<O>)
  | { exit: 0 | 2; text: string };

const HELP: ParseArgsOptionDescriptor = { type: 'boolean', short: 'h' };

/** Reads the arguments without printing or exiting (`parseBenchArgs` does both). */
export function readBenchArgs<O extends Record<string, BenchOption>>(
  spec: BenchArgsSpec<O>,
): BenchArgsOutcome<O> {
  const args = (spec.args ?? process.argv.slice(2)).filter((arg, i) => !(i === 0 && arg === '--'));
  if (args.includes('--help') || args.includes('-h')) return { exit: 0, text: benchHelp(spec) };
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({
      args,
      options: { ...stripped(spec.options), help: HELP },
      allowPositionals: spec.positionals !== undefined,
      strict: true,
    });
  } catch (error) {
    return { exit: 2, text: benchError(String((error as Error).message)) };
  }
  for (const [name, option] of Object.entries(spec.options)) {
    const value = parsed.values[name];
    if (
      option.number &&
      typeof value === 'string' &&
      (value.trim() === '' || !Number.isFinite(Number(value)))
    )
      return { exit: 2, text: benchError(`--${name} must be a number, got '${value}'`) };
  }
  return { values: parsed.values as Parsed<O>['values'], positionals: parsed.positionals };
}

/**
 * Reads the arguments of a benchmark script before it does anything else: `--help`/`-h` prints the
 * usage and exits 0; an unknown option, a missing value or a value that is not a number prints one
 * line and exits 2. `fail(message)` exits the same way for what the script checks itself.
 */
export function parseBenchArgs<O extends Record<string, BenchOption>>(
  spec: BenchArgsSpec<O>,
): BenchArgs<O> & { fail(message: string): never } {
  const outcome = readBenchArgs(spec);
  if (outcome.exit !== undefined) {
    (outcome.exit === 0 ? process.stdout : process.stderr).write(outcome.text);
    process.exit(outcome.exit);
  }
  return { values: outcome.values, positionals: outcome.positionals, fail: (m) => benchExit(benchError(m)) };
}

/** The `--help` text: the usage, then every option with its default and meaning. */
export function benchHelp(spec: BenchArgsSpec<Record<string, BenchOption>>): string {
  const rows = Object.entries(spec.options).map(([name, option]) => {
    const short = option.short ? `-${option.short}, ` : '';
    const value = option.type === 'string' ? ` ${option.value ?? '<value>'}` : '';
    const fallback = option.default === undefined ? '' : ` (default: ${String(option.default) || 'none'})`;
    return { flag: `${short}--${name}${value}`, text: `${option.help}${fallback}` };
  });
  rows.push({ flag: '-h, --help', text: 'print this help and exit' });
  const width = Math.max(...rows.map((row) => row.flag.length));
  const options = rows
    .map((row) => `  ${row.flag.padEnd(width)}  ${wrap(row.text, HELP_COLUMNS - width - 4, width + 4)}`)
    .join('\n');
  return `${spec.usage.trim()}\n\nOptions:\n${options}\n`;
}

/** Help lines are wrapped to this width (a narrower column than the terminal's is still read). */
const HELP_COLUMNS = 100;

/** `text` in lines of at most `columns` characters (a longer word stays whole), later ones indented. */
function wrap(text: string, columns: number, indent: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > Math.max(columns, 30)) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

function benchError(message: string): string {
  // parseArgs's messages end with advice of its own on `--` and positionals: the first line says it.
  return `error: ${message.split('\n')[0]?.replace(/\. To specify .*$/, '')} (run with --help)\n`;
}

function benchExit(text: string): never {
  process.stderr.write(text);
  process.exit(2);
}

function stripped(options: Record<string, BenchOption>): Record<string, ParseArgsOptionDescriptor> {
  return Object.fromEntries(
    Object.entries(options).map(([name, { help: _h, value: _v, number: _n, ...option }]) => [name, option]),
  );
}
