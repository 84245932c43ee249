import { defineConfig } from 'vitest/config';
import { sharedTestOptions, UPGRADE_TESTS } from './vitest.config.ts';

// The upgrade tier (`pnpm run test:upgrade`): the previous release's roles beside this checkout's
// on the real Kafka, Redis and PostgreSQL, with the integration tier's set-up.
export default defineConfig({
  test: {
    ...sharedTestOptions,
    include: UPGRADE_TESTS,
    globalSetup: ['./test/global-setup.ts'],
    setupFiles: ['./test/topics.setup.ts'],
  },
});
