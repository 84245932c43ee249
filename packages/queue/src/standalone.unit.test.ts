import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * The queue is a library of its own (README.md): importing it must not drag in the rest of
 * Requester's dependencies. It imports `@requester/shared` by subpath (`/redis`, `/errors`,
 * `/metrics`, ...), never the barrel, which loads the Kafka client, PostgreSQL and the tracing SDK.
 */

const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));

/**
 * The npm packages a bare Node process loads to import `specifier` (resolved from this package),
 * as seen by a module resolve hook: it sees ES imports and CommonJS requires alike.
 */
async function packagesLoadedBy(specifier: string): Promise<Set<string>> {
  const script = `
    import { registerHooks } from 'node:module';
    const urls = [];
    registerHooks({
      resolve(specifier, context, next) {
        const resolved = next(specifier, context);
        urls.push(resolved.url);
        return resolved;
      },
    });
    await import(${JSON.stringify(specifier)});
    process.stdout.write(JSON.stringify(urls));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '--eval', script], {
    cwd: PACKAGE_DIR,
  });
  const urls = JSON.parse(stdout) as string[];
  return new Set(urls.flatMap((url) => packageOf(url) ?? []));
}

/** `…/node_modules/@scope/name/…` → `@scope/name`; undefined for a module outside node_modules. */
function packageOf(url: string): string | undefined {
  const [, path] = url.split(/.*\/node_modules\//);
  if (path === undefined) return undefined;
  const [first = '', second = ''] = path.split('/');
  return first.startsWith('@') ? `${first}/${second}` : first;
}

/**
 * What the queue must not load. `@opentelemetry/api` alone is allowed: prom-client (the metrics
 * the queue reports) requires it itself; the tracing SDK and its exporter are Requester's.
 */
function unwanted(packages: Set<string>): string[] {
  return [...packages].filter(
    (name) =>
      name === 'kafkajs' ||
      name === 'postgres' ||
      name === '@node-rs/crc32' ||
      (name.startsWith('@opentelemetry/') && name !== '@opentelemetry/api'),
  );
}

describe('@requester/queue on its own', () => {
  it('loads neither kafkajs, nor postgres, nor the OpenTelemetry SDK: only what a Redis queue needs', async () => {
    const packages = await packagesLoadedBy('@requester/queue');
    expect(packages).toContain('ioredis');
    expect(unwanted(packages)).toEqual([]);
  });

  // The probe itself: the barrel of @requester/shared does load them, and the hook sees it.
  it('sees what the whole of @requester/shared loads', async () => {
    const packages = await packagesLoadedBy('@requester/shared');
    expect(unwanted(packages)).toEqual(
      expect.arrayContaining(['kafkajs', 'postgres', '@opentelemetry/sdk-trace-node']),
    );
  });
});
