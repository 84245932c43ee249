import { fileURLToPath } from 'node:url';
import { packagesLoadedBy, servicePackages } from '@requester/shared/testing';
import { expect, it } from 'vitest';

/**
 * The policies (breaker, limiter) are a library below the roles: they import `@requester/shared`
 * by subpath, so importing them loads no Kafka client, no PostgreSQL and no tracing SDK (the
 * probe itself is checked in packages/queue/src/standalone.unit.test.ts).
 */
it('@requester/policies loads neither kafkajs, nor postgres, nor the OpenTelemetry SDK', async () => {
  const packages = await packagesLoadedBy(
    '@requester/policies',
    fileURLToPath(new URL('..', import.meta.url)),
  );
  expect(packages).toContain('ioredis');
  expect(servicePackages(packages)).toEqual([]);
});
