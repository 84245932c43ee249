import { defineConfig, type ViteUserConfig } from 'vitest/config';

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
  // kafkajs 2.2.4 computes negative timeouts that Node 24 warns about (harmless, noisy).
  execArgv: ['--disable-warning=TimeoutNegativeWarning'],
  maxWorkers: 2,
  reporters: ['default', './test/summary-reporter.ts'],
} satisfies ViteUserConfig['test'];

// The whole suite, unit tests included. Tests talk to the real Kafka, Redis and PostgreSQL
// started by infra/up.sh (see README); each test isolates itself by its own topic names,
// Redis key prefixes and database schema, so files may run in parallel.
export default defineConfig({
  test: {
    ...sharedTestOptions,
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['./test/global-setup.ts'],
  },
});
