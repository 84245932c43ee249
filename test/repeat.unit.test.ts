import { describe, expect, it } from 'vitest';
import { addRun, type FileTally, type JsonReport, table } from './repeat.ts';

const root = '/repo';

function report(files: Array<[string, string, Array<[string, string]>]>): JsonReport {
  return {
    testResults: files.map(([name, status, tests]) => ({
      name: `${root}/${name}`,
      status,
      assertionResults: tests.map(([fullName, testStatus]) => ({ fullName, status: testStatus })),
    })),
  };
}

describe('repeat: failures counted per file over the runs', () => {
  it('counts each file and each failed test over the runs, most failures first', () => {
    const tallies = new Map<string, FileTally>();
    addRun(
      tallies,
      report([
        ['a.test.ts', 'passed', [['a one', 'passed']]],
        ['b.test.ts', 'failed', [['b one', 'failed']]],
      ]),
      1,
      root,
    );
    addRun(
      tallies,
      report([
        ['a.test.ts', 'failed', [['a one', 'failed']]],
        ['b.test.ts', 'failed', [['b one', 'failed']]],
      ]),
      1,
      root,
    );
    addRun(
      tallies,
      report([
        ['a.test.ts', 'passed', [['a one', 'passed']]],
        ['b.test.ts', 'passed', [['b one', 'passed']]],
      ]),
      0,
      root,
    );
    expect(table(tallies, 3).split('\n')).toEqual([
      'file       failed/runs',
      'b.test.ts  2/3',
      '             2× b one',
      'a.test.ts  1/3',
      '             1× a one',
      '2 of 2 files failed at least once in 3 runs',
    ]);
  });

  it('a file failed by a hook, a run with no report and a run failed outside any test are failures too', () => {
    const tallies = new Map<string, FileTally>();
    addRun(tallies, report([['a.test.ts', 'failed', [['a one', 'skipped']]]]), 1, root);
    addRun(tallies, undefined, 1, root);
    addRun(tallies, report([['a.test.ts', 'passed', [['a one', 'passed']]]]), 1, root);
    expect(tallies.get('a.test.ts')).toMatchObject({ runs: 2, failed: 1 });
    expect([...(tallies.get('a.test.ts')?.tests.keys() ?? [])]).toEqual(['(a hook or the import)']);
    expect(tallies.get('(the run itself)')).toMatchObject({ runs: 3, failed: 2 });
  });

  it('all green: no table, only the count', () => {
    const tallies = new Map<string, FileTally>();
    addRun(tallies, report([['a.test.ts', 'passed', [['a one', 'passed']]]]), 0, root);
    expect(table(tallies, 1)).toBe('0 of 1 files failed at least once in 1 runs');
  });
});
