import { defineConfig, type ViteUserConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/longest-first-sequencer.ts';

/**
 * Test files that need no Kafka, Redis or PostgreSQL are named `*.unit.test.ts`: `pnpm test:unit`
 * (vitest.unit.config.ts) runs only them, with no infrastructure; `pnpm test` runs them too.
 */
export const UNIT_TESTS = [
  'packages/*/src/**/*.unit.test.ts',
  'packages/*/test/**/*.unit.test.ts',
  'test/**/*.unit.test.ts',
];

/** What both tiers share: timeouts, process pool and reporters. */
export const sharedTestOptions = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  pool: 'forks',
  // Four on the 2-core box: the files wait on brokers, children and targets more than they compute
  // (docs/benchmarks/test-suite.md, "three workers or four").
  maxWorkers: 4,
  reporters: ['default', './test/summary-reporter.ts'],
} satisfies ViteUserConfig['test'];

// The whole suite, unit tests included, as three projects. Tests talk to the real Kafka, Redis and
// PostgreSQL started by infra/up.sh (see README); each test isolates itself by its own topic names,
// Redis key prefixes and database schema, so files may run in parallel.
// - unit: `*.unit.test.ts` share their worker processes (isolate: false): they hold no process-wide
//   state that outlives a file, and skipping the per-file module reload halves their time
//   (docs/benchmarks/test-suite.md, "Test suite").
// - integration: everything else, one fresh module graph per file, since those files start roles
//   that register metrics, tracers and signal handlers for the life of their process.
// - upgrade: below.
const INTEGRATION_TESTS = [
  'packages/*/src/**/*.test.ts',
  'packages/*/test/**/*.test.ts',
  'test/**/*.test.ts',
];

/**
 * The upgrade tier: the previous release installed beside this checkout, its roles beside this
 * checkout's. A project of its own (`pnpm run test:upgrade` runs it alone) in the same run as the
 * integration files, so its minute of waiting on processes fills a worker beside theirs instead of
 * adding to the suite's wall time.
 */
export const UPGRADE_TESTS = ['packages/requester/test/upgrade/**/!(*.unit).test.ts'];

/** What the files that talk to the real infrastructure share: its check, and their topics deleted. */
const withInfrastructure = {
  globalSetup: ['./test/global-setup.ts'],
  setupFiles: ['./test/topics.setup.ts'],
};

export default defineConfig({
  test: {
    ...sharedTestOptions,
    // The longest files first, from the last run's figures or test/file-durations.json, so that the
    // run does not end on one long file while the other worker idles.
    sequence: { sequencer: LongestFirstSequencer },
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT_TESTS, isolate: false } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: INTEGRATION_TESTS,
          exclude: [...UNIT_TESTS, ...UPGRADE_TESTS, '**/node_modules/**'],
          ...withInfrastructure,
        },
      },
      { extends: true, test: { name: 'upgrade', include: UPGRADE_TESTS, ...withInfrastructure } },
    ],
  },
});
