/**
 * Builds the published files into `dist/`: JavaScript (ES2022 modules) and type declarations from
 * `src/`. The declarations' relative imports are rewritten from `.ts` to `.js`, as TypeScript
 * does for the JavaScript, so that every consumer's TypeScript (not only one allowing `.ts`
 * imports) resolves them.
 *
 *   node packages/client/scripts/build.ts     (run by `pnpm pack`, as `prepack`)
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const packageDir = fileURLToPath(new URL('../', import.meta.url));
const dist = `${packageDir}dist`;
const tsc = fileURLToPath(new URL('../../../node_modules/.bin/tsc', import.meta.url));

rmSync(dist, { recursive: true, force: true });
execFileSync(tsc, ['-p', `${packageDir}tsconfig.build.json`], { stdio: 'inherit' });
for (const entry of readdirSync(dist, { recursive: true, encoding: 'utf8' })) {
  if (!entry.endsWith('.d.ts')) continue;
  const path = `${dist}/${entry}`;
  const text = readFileSync(path, 'utf8');
  writeFileSync(path, text.replace(/(from\s+['"]\.{1,2}\/[^'"]*)\.ts(['"])/g, '$1.js$2'));
}
console.log('built packages/client/dist');
