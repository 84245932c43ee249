import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Seconds each slow test file took, by path from the repository root (test/file-durations.ts writes it). */
export const FILE_DURATIONS_PATH = path.resolve(import.meta.dirname, 'file-durations.json');

function committedDurations(): Map<string, number> {
  try {
    const table = JSON.parse(readFileSync(FILE_DURATIONS_PATH, 'utf8')) as Record<string, number>;
    return new Map(Object.entries(table));
  } catch {
    return new Map();
  }
}

/**
 * Starts the longest files first, so that no minute-long file starts last and runs alone while
 * the other worker idles. Vitest does so itself from its cache of the last run; a fresh clone has
 * no cache (its fallback is file size, which says little about waits on brokers and processes), so
 * the committed figures of test/file-durations.json stand in for it. A file in neither is taken for
 * a short one (the table leaves short files out) and runs last, where short files fill the tail.
 * Projects mix (an upgrade file is as long as the longest integration ones); among files of equal
 * estimate, those of one project stay together.
 */
export class LongestFirstSequencer extends BaseSequencer {
  private readonly committed = committedDurations();

  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const estimate = (spec: TestSpecification): number => {
      const cached = cache.getTestSpecificationResult(spec);
      if (cached && !cached.failed) return cached.duration / 1_000;
      if (cached?.failed) return Number.POSITIVE_INFINITY;
      const relative = path.relative(this.ctx.config.root, spec.moduleId).split(path.sep).join('/');
      return this.committed.get(relative) ?? 0;
    };
    const ranked = files.map((spec) => ({ spec, seconds: estimate(spec) }));
    return ranked
      .sort((a, b) => {
        const groups = a.spec.project.config.sequence.groupOrder - b.spec.project.config.sequence.groupOrder;
        if (groups !== 0) return groups;
        // Failed files (infinite) first, in any order among themselves: NaN counts as a tie.
        const longer = b.seconds - a.seconds || 0;
        if (longer !== 0) return longer;
        if (a.spec.project.name === b.spec.project.name) return 0;
        return a.spec.project.name < b.spec.project.name ? -1 : 1;
      })
      .map(({ spec }) => spec);
  }
}
