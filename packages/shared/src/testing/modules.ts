import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * The npm packages a bare Node process loads to import `specifier`, resolved from `fromDir` (a
 * package's folder), as seen by a module resolve hook: it sees ES imports and CommonJS requires
 * alike. For checking that a library imports only what it needs.
 */
export async function packagesLoadedBy(specifier: string, fromDir: string): Promise<Set<string>> {
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
    cwd: fromDir,
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
 * Of `packages`, those only the Requester service needs: the Kafka client (and its CRC), the
 * PostgreSQL client, the OpenTelemetry SDK. `@opentelemetry/api` alone is not one of them:
 * prom-client (the metrics every library reports) requires it itself.
 */
export function servicePackages(packages: Set<string>): string[] {
  return [...packages].filter(
    (name) =>
      name === 'kafkajs' ||
      name === 'postgres' ||
      name === '@node-rs/crc32' ||
      (name.startsWith('@opentelemetry/') && name !== '@opentelemetry/api'),
  );
}
