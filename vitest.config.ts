import { defineConfig } from 'vitest/config';

// One test run for the whole workspace. Tests talk to the real Kafka, Redis and PostgreSQL
// started by infra/up.sh (see README); each test isolates itself by its own topic names,
// Redis key prefixes and database schema, so files may run in parallel.
export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['./test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // kafkajs 2.2.4 computes negative timeouts that Node 24 warns about (harmless, noisy).
    execArgv: ['--disable-warning=TimeoutNegativeWarning'],
    maxWorkers: 2,
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
