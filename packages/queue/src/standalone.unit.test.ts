import { fileURLToPath } from 'node:url';
import { packagesLoadedBy, servicePackages } from '@requester/shared/testing';
import { describe, expect, it } from 'vitest';

/**
 * The queue is a library of its own (README.md): importing it must not drag in the rest of
 * Requester's dependencies. It imports `@requester/shared` by subpath (`/redis`, `/errors`,
 * `/metrics`, ...), never the barrel, which loads the Kafka client and PostgreSQL (the tracing SDK
 * is loaded only when an exporter is configured).
 */

const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));

describe('@requester/queue on its own', () => {
  it('loads neither kafkajs, nor postgres, nor the OpenTelemetry SDK: only what a Redis queue needs', async () => {
    const packages = await packagesLoadedBy('@requester/queue', PACKAGE_DIR);
    expect(packages).toContain('ioredis');
    expect(servicePackages(packages)).toEqual([]);
  });

  // The probe itself: the barrel of @requester/shared does load the Kafka client and PostgreSQL, and
  // the hook sees it.
  it('sees what the whole of @requester/shared loads', async () => {
    const packages = await packagesLoadedBy('@requester/shared', PACKAGE_DIR);
    expect(servicePackages(packages)).toEqual(expect.arrayContaining(['kafkajs', 'postgres']));
  });
});
