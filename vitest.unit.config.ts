import { defineConfig } from 'vitest/config';
import { sharedTestOptions, UNIT_TESTS } from './vitest.config.ts';

// The unit tier: no global set-up (it would demand the infrastructure), and addresses that refuse
// every connection, so a `*.unit.test.ts` that reaches for Kafka, Redis or PostgreSQL fails here
// instead of passing on a machine where they happen to run.
const NOWHERE = '127.0.0.1:1';

export default defineConfig({
  test: {
    ...sharedTestOptions,
    include: UNIT_TESTS,
    isolate: false, // as the unit project of vitest.config.ts
    env: {
      KAFKA_BROKERS: NOWHERE,
      REDIS_URL: `redis://${NOWHERE}`,
      DATABASE_URL: `postgres://nobody@${NOWHERE}/nothing`,
      TEST_DATABASE_URL: `postgres://nobody@${NOWHERE}/nothing`,
    },
  },
});
