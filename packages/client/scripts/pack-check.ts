/**
 * Checks the package as npm would install it (`pnpm run client:pack`, part of `client:check`):
 * packs it (`pnpm pack`, which builds `dist/` first and applies `publishConfig`), then fails when
 * - the tarball holds anything but the built files, README, CHANGELOG, API.md, LICENSE and
 *   package.json (no sources, tests or scripts), or misses one of them;
 * - the packed package.json has a runtime dependency, or an export whose files are not packed;
 * - an export does not load by its package name, on this Node and on the machine's other `node`
 *   when there is one (another major version: the package promises Node ≥ 18);
 * - TypeScript does not resolve the types of every export under `node16` and `bundler` module
 *   resolution (what `@arethetypeswrong/cli` checks), or `publint` finds a problem.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = fileURLToPath(new URL('../', import.meta.url));
const bin = (name: string) => fileURLToPath(new URL(`../../../node_modules/.bin/${name}`, import.meta.url));
const problems: string[] = [];

const work = mkdtempSync(join(tmpdir(), 'requester-client-pack-'));
try {
  execFileSync('pnpm', ['pack', '--pack-destination', work], {
    cwd: packageDir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const tarball = join(work, 'requester-client-0.1.0.tgz'.replace('0.1.0', version()));
  const files = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((f) => f.replace(/^package\//, ''))
    .sort();
  checkFiles(files);

  // Installed as a consumer would have it: node_modules/@requester/client.
  const consumer = join(work, 'consumer');
  const installed = join(consumer, 'node_modules/@requester/client');
  mkdirSync(installed, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Manifest;
  checkManifest(manifest, new Set(files));
  checkLoads(consumer, Object.keys(manifest.exports));
  checkTypes(consumer, Object.keys(manifest.exports));
  checkPublint(installed);
} finally {
  rmSync(work, { recursive: true, force: true });
}

if (problems.length > 0) {
  console.error(`@requester/client pack check failed:\n- ${problems.join('\n- ')}`);
  process.exitCode = 1;
} else {
  console.log('@requester/client pack check passed');
}

interface Manifest {
  exports: Record<string, string | { types: string; default: string }>;
  dependencies?: Record<string, string>;
}

function version(): string {
  return (JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version: string }).version;
}

function checkFiles(files: string[]): void {
  const allowed = /^(dist\/.+\.(js|d\.ts)|package\.json|README\.md|CHANGELOG\.md|API\.md|LICENSE)$/;
  for (const file of files) if (!allowed.test(file)) problems.push(`unexpected file in the tarball: ${file}`);
  for (const file of ['package.json', 'README.md', 'CHANGELOG.md', 'API.md', 'LICENSE', 'dist/index.js']) {
    if (!files.includes(file)) problems.push(`missing from the tarball: ${file}`);
  }
  if (files.some((f) => /\.test\.|fixture/.test(f))) problems.push('tests are packed');
}

function checkManifest(manifest: Manifest, files: Set<string>): void {
  if (manifest.dependencies && Object.keys(manifest.dependencies).length > 0)
    problems.push(`runtime dependencies: ${Object.keys(manifest.dependencies).join(', ')}`);
  for (const [path, target] of Object.entries(manifest.exports)) {
    const targets = typeof target === 'string' ? [target] : [target.types, target.default];
    if (typeof target !== 'string' && !target.types) problems.push(`export ${path} has no types`);
    for (const file of targets) {
      if (!files.has(file.replace(/^\.\//, '')))
        problems.push(`export ${path} points at ${file}, not packed`);
    }
  }
}

/** Other `node` binaries on this machine than the one running this script (e.g. the system's). */
function nodes(): string[] {
  const others = ['/usr/bin/node', '/usr/local/bin/node'].filter((p) => existsSync(p));
  return [
    process.execPath,
    ...others.filter((p) => execFileSync(p, ['--version'], { encoding: 'utf8' }).trim() !== process.version),
  ];
}

function checkLoads(consumer: string, paths: string[]): void {
  const names = paths.filter((p) => p !== './package.json').map((p) => `@requester/client${p.slice(1)}`);
  const script = `for (const name of ${JSON.stringify(names)}) { const m = await import(name); if (Object.keys(m).length === 0) throw new Error(name + ' exports nothing'); }`;
  for (const node of nodes()) {
    try {
      execFileSync(node, ['--input-type=module', '-e', script], {
        cwd: consumer,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
    } catch (err) {
      problems.push(
        `the exports do not load on ${node}: ${String((err as { stderr?: unknown }).stderr ?? err)}`,
      );
    }
  }
}

function checkTypes(consumer: string, paths: string[]): void {
  const names = paths.filter((p) => p !== './package.json').map((p) => `@requester/client${p.slice(1)}`);
  writeFileSync(
    join(consumer, 'index.ts'),
    `${names.map((n, i) => `import * as m${i} from '${n}';`).join('\n')}\nexport const all = [${names.map((_, i) => `m${i}`).join(', ')}];\n` +
      "import type { ResultEnvelope } from '@requester/client';\nexport type Status = ResultEnvelope['response']['status'];\n",
  );
  for (const [module, resolution] of [
    ['node16', 'node16'],
    ['esnext', 'bundler'],
  ] as const) {
    const tsconfig = {
      compilerOptions: {
        module,
        moduleResolution: resolution,
        target: 'es2022',
        lib: ['es2022', 'dom'],
        types: [],
        strict: true,
        noEmit: true,
        skipLibCheck: false,
      },
      files: ['index.ts'],
    };
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify(tsconfig));
    try {
      execFileSync(bin('tsc'), ['-p', consumer], { cwd: consumer, encoding: 'utf8', stdio: 'pipe' });
    } catch (err) {
      problems.push(
        `types do not resolve with moduleResolution ${resolution}: ${String((err as { stdout?: unknown }).stdout)}`,
      );
    }
  }
}

function checkPublint(installed: string): void {
  try {
    const out = execFileSync(join(packageDir, 'node_modules/.bin/publint'), ['run', installed, '--strict'], {
      encoding: 'utf8',
      stdio: 'pipe',
    });
    if (/error|warning|suggestion/i.test(out) && !/All good/i.test(out))
      problems.push(`publint: ${out.trim()}`);
  } catch (err) {
    const e = err as { stdout?: unknown; stderr?: unknown };
    problems.push(`publint: ${String(e.stdout ?? '')}${String(e.stderr ?? '')}`.trim());
  }
}
