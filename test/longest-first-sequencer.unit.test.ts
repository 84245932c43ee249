import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TestSpecification } from 'vitest/node';
import { LongestFirstSequencer } from './longest-first-sequencer.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

function spec(file: string, project = 'integration'): TestSpecification {
  return {
    moduleId: path.join(ROOT, file),
    project: { name: project, config: { sequence: { groupOrder: 0 } } },
  } as unknown as TestSpecification;
}

function sequencer(cached: Record<string, { duration: number; failed: boolean }>): LongestFirstSequencer {
  const ctx = {
    config: { root: ROOT },
    cache: {
      getTestSpecificationResult: (s: TestSpecification) => cached[path.relative(ROOT, s.moduleId)],
    },
  };
  return new LongestFirstSequencer(ctx as never);
}

describe('LongestFirstSequencer', () => {
  it('with no cache (a fresh clone) orders by the committed figures, files not in them last, integration before unit', async () => {
    const files = [
      spec('packages/a/src/short.test.ts'),
      spec('packages/a/src/short.unit.test.ts', 'unit'),
      spec('packages/requester/test/start-race.test.ts'),
      spec('packages/requester/test/e2e/kafka-crash.test.ts'),
    ];
    const sorted = await sequencer({}).sort(files);
    expect(sorted.map((s) => path.basename(s.moduleId))).toEqual([
      'kafka-crash.test.ts',
      'start-race.test.ts',
      'short.test.ts',
      'short.unit.test.ts',
    ]);
  });

  it('mixes projects by length: a long file of another project does not wait for every integration file', async () => {
    const files = [
      spec('packages/a/src/short.test.ts'),
      spec('packages/requester/test/upgrade/rolling.test.ts', 'upgrade'),
      spec('packages/a/src/short.unit.test.ts', 'unit'),
      spec('packages/requester/test/e2e/kafka-crash.test.ts'),
      spec('packages/requester/test/start-race.test.ts'),
    ];
    const sorted = await sequencer({}).sort(files);
    expect(sorted.map((s) => `${s.project.name} ${path.basename(s.moduleId)}`)).toEqual([
      'integration kafka-crash.test.ts',
      'upgrade rolling.test.ts',
      'integration start-race.test.ts',
      'integration short.test.ts',
      'unit short.unit.test.ts',
    ]);
  });

  it("prefers vitest's cache of the last run, a failed file first", async () => {
    const files = [
      spec('packages/requester/test/e2e/kafka-crash.test.ts'),
      spec('packages/a/src/long.test.ts'),
      spec('packages/a/src/failed.test.ts'),
    ];
    const sorted = await sequencer({
      'packages/requester/test/e2e/kafka-crash.test.ts': { duration: 1_000, failed: false },
      'packages/a/src/long.test.ts': { duration: 500_000, failed: false },
      'packages/a/src/failed.test.ts': { duration: 10, failed: true },
    }).sort(files);
    expect(sorted.map((s) => path.basename(s.moduleId))).toEqual([
      'failed.test.ts',
      'long.test.ts',
      'kafka-crash.test.ts',
    ]);
  });
});
