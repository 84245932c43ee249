import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { type BenchOption, readBenchArgs } from './bench-args.ts';

const options = {
  count: { type: 'string', default: '20000', value: 'N', number: true, help: 'requests per round' },
  baseline: { type: 'string', value: '<checkout>', help: 'a second Requester from that checkout' },
  memory: { type: 'boolean', default: false, help: 'RSS after every round' },
} satisfies Record<string, BenchOption>;
const usage = 'What it measures.\n\n  node bench/x.ts [--count 20000]';

describe('bench arguments', () => {
  it('prints the usage, then every option with its placeholder, default and meaning, for --help and -h', () => {
    for (const flag of ['--help', '-h']) {
      const outcome = readBenchArgs({ usage, options, args: ['--count', 'nonsense', flag] });
      expect(outcome.exit).toBe(0);
      const text = outcome.exit === 0 ? outcome.text : '';
      expect(text.startsWith(usage)).toBe(true);
      expect(text).toMatch(/--count N +requests per round \(default: 20000\)\n/);
      expect(text).toMatch(/--baseline <checkout> +a second Requester from that checkout\n/);
      expect(text).toMatch(/--memory +RSS after every round \(default: false\)\n/);
      expect(text).toMatch(/-h, --help +print this help and exit\n/);
    }
  });

  it('gives the values with their defaults, a leading -- dropped', () => {
    const outcome = readBenchArgs({ usage, options, args: ['--', '--count', '5', '--memory'] });
    expect(outcome).toEqual({ values: { count: '5', memory: true }, positionals: [] });
  });

  it('refuses an unknown option, a missing value, a value that is not a number and stray positionals: one line, exit 2', () => {
    const cases: Array<[string[], string]> = [
      [['--bogus'], "error: Unknown option '--bogus' (run with --help)\n"],
      [['--baseline'], "error: Option '--baseline <value>' argument missing (run with --help)\n"],
      [['--count', '1e'], "error: --count must be a number, got '1e' (run with --help)\n"],
      [['--count', ''], "error: --count must be a number, got '' (run with --help)\n"],
      [
        ['stray'],
        "error: Unexpected argument 'stray'. This command does not take positional arguments (run with --help)\n",
      ],
    ];
    for (const [args, text] of cases)
      expect(readBenchArgs({ usage, options, args })).toEqual({ exit: 2, text });
  });

  it('makes a real bench script exit 0 on --help and 2 on an unknown option, before it reads anything', () => {
    const script = path.resolve(import.meta.dirname, '../../../../bench/cpuprofile.ts');
    const help = spawnSync(process.execPath, [script, '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/--top N +rows of each table \(default: 40\)/);
    const bogus = spawnSync(process.execPath, [script, 'x.cpuprofile', '--bogus'], { encoding: 'utf8' });
    expect(bogus.status).toBe(2);
    expect(bogus.stderr).toBe("error: Unknown option '--bogus' (run with --help)\n");
  });
});
